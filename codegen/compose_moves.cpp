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

StridedView contiguous(const Shape &shape) {
  StridedView v{shape, std::vector<int64_t>(shape.size(), 1), 0};
  for (size_t d = shape.size(); d-- > 1;) v.strides[d - 1] = v.strides[d] * shape[d];
  return v;
}

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
  std::optional<StridedView> v = num_elements(in_shape) > 0 ? compose_view(contiguous(in_shape), m) : std::nullopt;
  if (v) m.view = *v;
  else m.in_shape.clear();  // nothing to compose with (no elements)
  return m;
}

namespace {

/** The "// op (Kind)" line a kernel's code starts with, or "". */
std::string label_of(const std::string &code) {
  return code.rfind("// ", 0) == 0 ? code.substr(0, code.find('\n') + 1) : "";
}

std::string view_copy_code(int src, const StridedView &v, int dst, const StridedView *at, int elem_size) {
  std::string code = "rt::view_copy(" + ref(src) + ", " + dims_literal(v.shape) + ", " + dims_literal(v.strides) +
                     ", " + std::to_string(v.offset) + ", " + ref(dst) + ", ";
  if (at) code += dims_literal(at->strides) + ", " + std::to_string(at->offset) + ", ";
  return code + std::to_string(elem_size) + ");";
}

}  // namespace

void compose_moves(RankProgram &prog) {
  std::vector<Instr> &step = prog.step;
  std::vector<int> refs(prog.buffers.size(), 0), writer(prog.buffers.size(), -1);
  for (const Instr &in : step)
    for (int b : in.buffers) ++refs[static_cast<size_t>(b)];
  std::vector<bool> gone(step.size(), false);
  // The Move that alone wrote `b`'s source when statement i may read through it instead: that source untouched in
  // between but by other Moves reading it, and nothing else touching b's source buffer.
  auto earlier = [&](size_t i, const Move &b) -> const Move * {
    int x = b.src, j = x < 0 ? -1 : writer[static_cast<size_t>(x)];
    if (j < 0 || gone[static_cast<size_t>(j)] || refs[static_cast<size_t>(x)] != 2 ||
        prog.buffers[static_cast<size_t>(x)].persistent || !step[i].val_code.empty() ||
        !step[static_cast<size_t>(j)].val_code.empty())
      return nullptr;
    const Move &a = *step[static_cast<size_t>(j)].move;
    if (prog.buffers[static_cast<size_t>(a.src)].persistent) return nullptr;
    for (size_t k = static_cast<size_t>(j) + 1; k < i; ++k)
      for (int buf : step[k].buffers)
        if (buf == a.src && !(step[k].move && step[k].move->src == a.src)) return nullptr;
    return &a;
  };
  auto drop = [&](const Move &b) {
    gone[static_cast<size_t>(writer[static_cast<size_t>(b.src)])] = true;
    refs[static_cast<size_t>(b.src)] = 0;
  };
  for (size_t i = 0; i < step.size(); ++i) {
    if (!step[i].concat_parts.empty()) {
      // Each part composed where it can be, written into its place; the rest copied from their buffers as they are.
      std::string code;
      std::vector<int> bufs;
      bool composed = false;
      for (const Move &part : step[i].concat_parts) {
        if (num_elements(part.dst_view->shape) == 0) continue;
        const Move *a = earlier(i, part);
        std::optional<StridedView> v = a ? compose_view(a->view, part) : std::nullopt;
        // The part's place split into the same dims (v's are a refinement of the part's shape).
        std::vector<int> group;
        std::optional<StridedView> at = v ? refine(*part.dst_view, v->shape, group) : std::nullopt;
        if (at && at->shape == v->shape) {
          code += (code.empty() ? "" : "\n") + view_copy_code(a->src, *v, part.dst, &*at, part.elem_size);
          bufs.push_back(a->src);
          drop(part);
          composed = true;
        } else {
          // The part as it is, whole and contiguous.
          code += (code.empty() ? "" : "\n") + view_copy_code(part.src, contiguous(part.dst_view->shape), part.dst,
                                                              &*part.dst_view, part.elem_size);
          bufs.push_back(part.src);
        }
      }
      if (composed) {
        bufs.push_back(step[i].concat_parts.front().dst);
        step[i].code = label_of(step[i].code) + code;
        step[i].buffers = bufs;
      }
      continue;
    }
    if (!step[i].move) continue;
    const Move b = *step[i].move;
    const Move *a = earlier(i, b);
    writer[static_cast<size_t>(b.dst)] = static_cast<int>(i);
    std::optional<StridedView> v = a ? compose_view(a->view, b) : std::nullopt;
    if (!v) continue;
    Move m;
    m.src = a->src;
    m.dst = b.dst;
    m.elem_size = b.elem_size;
    m.view = *v;
    step[i].code = label_of(step[i].code) + view_copy_code(m.src, *v, m.dst, nullptr, m.elem_size);
    step[i].buffers = {m.src, m.dst};
    step[i].move = m;
    drop(b);
  }
  std::vector<Instr> kept;
  kept.reserve(step.size());
  for (size_t i = 0; i < step.size(); ++i)
    if (!gone[i]) kept.push_back(std::move(step[i]));
  step = std::move(kept);
}

}  // namespace cleave::codegen
