#include "codegen/collectives.h"

#include <algorithm>
#include <map>

namespace cleave::codegen {

bool box_contains(const Box &outer, const Box &inner) {
  for (size_t d = 0; d < outer.size(); ++d)
    if (inner[d].begin < outer[d].begin || inner[d].end > outer[d].end) return false;
  return true;
}

std::vector<std::vector<int>> axis_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          size_t axis) {
  return axes_groups(devices, mesh, {axis});
}

std::vector<std::vector<int>> axes_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          const std::vector<size_t> &axes) {
  // Devices are laid out row-major, so visiting them in order lists each group's members row-major along `axes`.
  std::map<std::vector<int64_t>, std::vector<int>> groups;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto c = plan::mesh_coords(mesh, static_cast<int64_t>(i));
    for (size_t a : axes) c[a] = 0;
    groups[c].push_back(devices[i]);
  }
  std::vector<std::vector<int>> out;
  for (auto &[key, members] : groups) out.push_back(std::move(members));
  return out;
}

namespace {

bool pairwise_disjoint(const std::vector<Box> &boxes) {
  for (size_t i = 0; i < boxes.size(); ++i)
    for (size_t j = i + 1; j < boxes.size(); ++j)
      if (!plan::box_empty(box_intersect(boxes[i], boxes[j]))) return false;
  return true;
}

}  // namespace

bool tiles(const std::vector<Box> &blocks, const Box &whole) {
  if (blocks.size() < 2 || whole.empty()) return false;
  int64_t size = box_volume(blocks[0]), total = 0;
  for (const Box &b : blocks) {
    if (b.size() != whole.size() || plan::box_empty(b) || box_volume(b) != size || !box_contains(whole, b))
      return false;
    total += size;
  }
  return total == box_volume(whole) && pairwise_disjoint(blocks);
}

bool concatenates(const std::vector<Box> &blocks, const Box &whole) {
  // Block i must be rows [i*k, (i+1)*k) of the first dim of `whole` that is not 1 wide, with every later dim whole
  // and every earlier dim of width 1.
  int64_t next = 0;
  for (const Box &b : blocks) {
    size_t d = 0;
    while (d < whole.size() && whole[d].size() == 1) ++d;
    if (d == whole.size()) return false;
    for (size_t e = 0; e < whole.size(); ++e) {
      if (e == d) continue;
      if (b[e] != whole[e]) return false;
    }
    if (b[d].begin - whole[d].begin != next) return false;
    next = b[d].end - whole[d].begin;
  }
  return !blocks.empty();
}

bool all_to_all_pattern(const std::vector<Box> &owned, const std::vector<Box> &wanted) {
  size_t n = owned.size();
  if (n < 2 || wanted.size() != n || !pairwise_disjoint(owned)) return false;
  int64_t size = -1;
  for (size_t j = 0; j < n; ++j) {
    int64_t covered = 0;
    for (size_t i = 0; i < n; ++i) {
      Box part = box_intersect(owned[i], wanted[j]);
      if (plan::box_empty(part)) return false;
      int64_t e = box_volume(part);
      if (size < 0) size = e;
      if (e != size) return false;
      covered += e;
    }
    if (covered != box_volume(wanted[j])) return false;
  }
  return true;
}

}  // namespace cleave::codegen
