#include "codegen/compose_moves.h"

#include <algorithm>
#include <string>

namespace cleave::codegen {
namespace {

/** `a`'s elements split into dims that both a's dims and `view`'s are products of (consecutive runs), each with its
 *  stride in a's source; group[d] is the number of those dims that make view dim d (0 for a dim of size 1). */
std::optional<StridedView> refine(const StridedView &a, const Shape &view, std::vector<int> &group) {
  std::vector<std::pair<int64_t, int64_t>> inner_first;  // (size, stride)
  group.assign(view.size(), 0);
  int i = static_cast<int>(a.shape.size()) - 1;
  int64_t left = 1, stride = 0;  // the part of a's dim i + 1 not yet taken, and its stride
  for (int j = static_cast<int>(view.size()) - 1; j >= 0; --j) {
    for (int64_t need = view[static_cast<size_t>(j)]; need > 1;) {
      while (left == 1) {
        if (i < 0) return std::nullopt;
        left = a.shape[static_cast<size_t>(i)];
        stride = a.strides[static_cast<size_t>(i)];
        --i;
      }
      int64_t take = std::min(left, need);
      if (left % take != 0 || need % take != 0) return std::nullopt;
      inner_first.emplace_back(take, stride);
      ++group[static_cast<size_t>(j)];
      need /= take;
      left /= take;
      stride *= take;
    }
  }
  if (left != 1) return std::nullopt;
  for (; i >= 0; --i)
    if (a.shape[static_cast<size_t>(i)] != 1) return std::nullopt;
  StridedView out;
  out.offset = a.offset;
  for (auto it = inner_first.rbegin(); it != inner_first.rend(); ++it) {
    out.shape.push_back(it->first);
    out.strides.push_back(it->second);
  }
  return out;
}

std::string ref(int buffer) { return "$" + std::to_string(buffer) + "$"; }

}  // namespace

std::optional<StridedView> compose_view(const StridedView &a, const Move &b) {
  if (b.in_shape.empty() || num_elements(b.in_shape) != num_elements(a.shape) || num_elements(a.shape) == 0)
    return std::nullopt;
  std::vector<int> group;
  std::optional<StridedView> f = refine(a, b.in_shape, group);
  if (!f) return std::nullopt;
  // first[d]: view dim d's first dim in f.
  std::vector<size_t> first(group.size(), 0);
  for (size_t d = 1; d < group.size(); ++d) first[d] = first[d - 1] + static_cast<size_t>(group[d - 1]);
  StridedView out;
  out.offset = f->offset;
  for (size_t d = 0; d < b.in_shape.size(); ++d) {
    bool whole = b.start[d] == 0 && b.extent[d] == b.in_shape[d];
    if (whole) continue;
    if (group[d] != 1) return std::nullopt;  // a box of a dim split in f
    out.offset += b.start[d] * f->strides[first[d]];
    f->shape[first[d]] = b.extent[d];
  }
  for (size_t o = 0; o < b.in_shape.size(); ++o) {
    size_t d = b.perm.empty() ? o : static_cast<size_t>(b.perm[o]);
    for (size_t k = first[d]; k < first[d] + static_cast<size_t>(group[d]); ++k) {
      out.shape.push_back(f->shape[k]);
      out.strides.push_back(f->strides[k]);
    }
  }
  return out;
}

Move box_move(int src, int dst, int elem_size, const Shape &in_shape, const Shape &start, const Shape &extent,
              std::vector<int64_t> perm) {
  Move m;
  m.src = src;
  m.dst = dst;
  m.elem_size = elem_size;
  m.in_shape = in_shape;
  m.start = start;
  m.extent = extent;
  m.perm = std::move(perm);
  StridedView whole{in_shape, std::vector<int64_t>(in_shape.size(), 1), 0};
  for (size_t d = in_shape.size(); d-- > 1;) whole.strides[d - 1] = whole.strides[d] * in_shape[d];
  std::optional<StridedView> v = num_elements(in_shape) > 0 ? compose_view(whole, m) : std::nullopt;
  if (v) m.view = *v;
  else m.in_shape.clear();  // nothing to compose with (no elements)
  return m;
}

void compose_moves(RankProgram &prog) {
  std::vector<Instr> &step = prog.step;
  std::vector<int> refs(prog.buffers.size(), 0), writer(prog.buffers.size(), -1);
  for (const Instr &in : step)
    for (int b : in.buffers) ++refs[static_cast<size_t>(b)];
  std::vector<bool> gone(step.size(), false);
  for (size_t i = 0; i < step.size(); ++i) {
    if (!step[i].move) continue;
    const Move b = *step[i].move;
    int x = b.src, j = writer[static_cast<size_t>(x)];
    writer[static_cast<size_t>(b.dst)] = static_cast<int>(i);
    if (j < 0 || gone[static_cast<size_t>(j)] || refs[static_cast<size_t>(x)] != 2 ||
        prog.buffers[static_cast<size_t>(x)].persistent || !step[i].val_code.empty() ||
        !step[static_cast<size_t>(j)].val_code.empty())
      continue;
    const Move &a = *step[static_cast<size_t>(j)].move;
    bool source_kept = !prog.buffers[static_cast<size_t>(a.src)].persistent;
    for (size_t k = static_cast<size_t>(j) + 1; k < i && source_kept; ++k)
      for (int buf : step[k].buffers)
        if (buf == a.src && !(step[k].move && step[k].move->src == a.src)) source_kept = false;
    std::optional<StridedView> v = source_kept ? compose_view(a.view, b) : std::nullopt;
    if (!v) continue;
    Move m;
    m.src = a.src;
    m.dst = b.dst;
    m.elem_size = b.elem_size;
    m.view = *v;
    step[i].code = "rt::view_copy(" + ref(m.src) + ", " + dims_literal(v->shape) + ", " + dims_literal(v->strides) +
                   ", " + std::to_string(v->offset) + ", " + ref(m.dst) + ", " + std::to_string(m.elem_size) + ");";
    step[i].buffers = {m.src, m.dst};
    step[i].move = m;
    gone[static_cast<size_t>(j)] = true;
    refs[static_cast<size_t>(x)] = 0;
  }
  std::vector<Instr> kept;
  kept.reserve(step.size());
  for (size_t i = 0; i < step.size(); ++i)
    if (!gone[i]) kept.push_back(std::move(step[i]));
  step = std::move(kept);
}

}  // namespace cleave::codegen
