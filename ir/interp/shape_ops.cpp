// Data movement: Reshape, Transpose, Expand, Concat, Split, Slice, Gather, and the gradients SliceGrad, GatherGrad.
#include <algorithm>

#include "ir/interp/kernels.h"

namespace cleave::interp {
namespace {

/** Slice attributes resolved per dim of X: start and step (dims not in axes take the whole range). */
struct SliceSpec {
  std::vector<int64_t> start, step;
  Shape out;
};

SliceSpec slice_spec(const KernelArgs &k, const Shape &x) {
  int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> starts = k.op.attr_ints("starts"), ends = k.op.attr_ints("ends");
  std::vector<int64_t> axes = k.op.has_attr("axes") ? k.op.attr_ints("axes") : std::vector<int64_t>{};
  if (!k.op.has_attr("axes"))
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> steps = ints_or(k.op, "steps", starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    CLEAVE_USER_ERROR(k.label(), ": starts/ends/axes/steps differ in length");
  SliceSpec s;
  s.start.assign(x.size(), 0);
  s.step.assign(x.size(), 1);
  s.out = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t a = static_cast<size_t>(norm_axis(k, axes[i], rank));
    int64_t st = steps[i], b = starts[i], e = ends[i];
    if (st == 0) CLEAVE_USER_ERROR(k.label(), ": step 0");
    // Clamp as the shape rule does (the importer already clamped imported Slices; hand-written IR may not be).
    int64_t dim = x[a];
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      b = std::clamp<int64_t>(b, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t len = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
    s.start[a] = b;
    s.step[a] = st;
    s.out[a] = std::max<int64_t>(len, 0);
  }
  return s;
}

/** Flat index into X of every element of the slice, in the slice's row-major order. */
std::vector<int64_t> slice_sources(const Shape &x, const SliceSpec &s) {
  std::vector<int64_t> xs = strides_of(x), idx;
  std::vector<int64_t> src(static_cast<size_t>(num_elements(s.out)));
  for (size_t f = 0; f < src.size(); ++f) {
    unravel(static_cast<int64_t>(f), s.out, idx);
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += (s.start[d] + idx[d] * s.step[d]) * xs[d];
    src[f] = o;
  }
  return src;
}

/** Calls f(data_flat, out_flat) for Gather with data of shape `data`, indices `ind`, along `axis`. */
template <typename F>
void for_each_gather(const KernelArgs &k, const Shape &data, const Value &ind, int64_t axis, F f) {
  int64_t outer = 1, inner = 1, dim = data[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= data[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < data.size(); ++d) inner *= data[d];
  int64_t ni = static_cast<int64_t>(ind.data.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < ni; ++j) {
      int64_t src = wrapped_index(k, ind.data[static_cast<size_t>(j)], dim);
      for (int64_t i = 0; i < inner; ++i) f((o * dim + src) * inner + i, (o * ni + j) * inner + i);
    }
}

Shape gather_shape(const Shape &data, const Shape &ind, int64_t axis) {
  Shape s(data.begin(), data.begin() + axis);
  s.insert(s.end(), ind.begin(), ind.end());
  s.insert(s.end(), data.begin() + axis + 1, data.end());
  return s;
}

}  // namespace

void kernel_Reshape(const KernelArgs &k) {
  const Value &x = k.in(0);
  Value &y = k.out(0);
  CLEAVE_CHECK(num_elements(y.shape) == num_elements(x.shape), k.label(), ": ", shape_str(x.shape), " -> ",
               shape_str(y.shape));
  y.data = x.data;
}

void kernel_Transpose(const KernelArgs &k) {
  const Value &x = k.in(0);
  size_t rank = x.shape.size();
  std::vector<int64_t> perm;
  if (k.op.has_attr("perm")) {
    perm = k.op.attr_ints("perm");
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != rank) CLEAVE_USER_ERROR(k.label(), ": perm has ", perm.size(), " entries for rank ", rank);
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) shape[i] = x.shape[static_cast<size_t>(norm_axis(k, perm[i], rank))];
  k.expect_out_shape(0, shape);
  std::vector<int64_t> xs = strides_of(x.shape), idx;
  Value &y = k.out(0);
  for (size_t f = 0; f < y.data.size(); ++f) {
    unravel(static_cast<int64_t>(f), shape, idx);
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += idx[i] * xs[static_cast<size_t>(perm[i])];
    y.data[f] = x.data[static_cast<size_t>(src)];
  }
}

void kernel_Expand(const KernelArgs &k) {
  const Value &x = k.in(0);
  Value &y = k.out(0);
  // ONNX Expand broadcasts both ways (shape may hold 1s where X is larger); the graph's output is the result.
  Shape shape = broadcast_shape(k, x.shape, k.op.has_attr("shape") ? k.op.attr_ints("shape") : y.shape);
  k.expect_out_shape(0, shape);
  std::vector<int64_t> map = broadcast_index_map(x.shape, shape);
  for (size_t i = 0; i < y.data.size(); ++i) y.data[i] = x.data[static_cast<size_t>(map[i])];
}

void kernel_Concat(const KernelArgs &k) {
  if (k.ins.empty()) CLEAVE_USER_ERROR(k.label(), ": no inputs");
  const Shape &first = k.in(0).shape;
  int64_t axis = norm_axis(k, k.op.attr_int("axis"), static_cast<int64_t>(first.size()));
  Shape shape = first;
  shape[axis] = 0;
  for (size_t i = 0; i < k.ins.size(); ++i) {
    Shape s = k.in(i).shape;
    if (s.size() != first.size()) CLEAVE_USER_ERROR(k.label(), ": inputs differ in rank");
    shape[axis] += s[axis];
    s[axis] = first[axis];
    if (s != first) CLEAVE_USER_ERROR(k.label(), ": input ", i, " has shape ", shape_str(k.in(i).shape));
  }
  k.expect_out_shape(0, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  Value &y = k.out(0);
  int64_t offset = 0;  // along axis
  for (size_t i = 0; i < k.ins.size(); ++i) {
    const Value &x = k.in(i);
    int64_t len = x.shape[axis];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = 0; a < len; ++a)
        for (int64_t in = 0; in < inner; ++in)
          y.data[(o * shape[axis] + offset + a) * inner + in] = x.data[(o * len + a) * inner + in];
    offset += len;
  }
}

void kernel_Split(const KernelArgs &k) {
  const Value &x = k.in(0);
  int64_t axis = norm_axis(k, k.op.attr_int("axis", 0), static_cast<int64_t>(x.shape.size()));
  std::vector<int64_t> sizes;
  if (k.op.has_attr("split")) {
    sizes = k.op.attr_ints("split");
  } else {
    for (size_t i = 0; i < k.outs.size(); ++i) sizes.push_back(k.out(i).shape[axis]);
  }
  if (sizes.size() != k.outs.size()) CLEAVE_USER_ERROR(k.label(), ": split has ", sizes.size(), " parts for ", k.outs.size(), " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != x.shape[axis]) CLEAVE_USER_ERROR(k.label(), ": split sizes sum to ", total, ", not ", x.shape[axis]);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Shape s = x.shape;
    s[axis] = sizes[i];
    k.expect_out_shape(i, s);
    if (k.has_out(i)) {
      Value &y = *k.outs[i];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t a = 0; a < sizes[i]; ++a)
          for (int64_t in = 0; in < inner; ++in)
            y.data[(o * sizes[i] + a) * inner + in] = x.data[(o * x.shape[axis] + offset + a) * inner + in];
    }
    offset += sizes[i];
  }
}

void kernel_Slice(const KernelArgs &k) {
  const Value &x = k.in(0);
  SliceSpec s = slice_spec(k, x.shape);
  k.expect_out_shape(0, s.out);
  std::vector<int64_t> src = slice_sources(x.shape, s);
  Value &y = k.out(0);
  for (size_t i = 0; i < src.size(); ++i) y.data[i] = x.data[static_cast<size_t>(src[i])];
}

void kernel_SliceGrad(const KernelArgs &k) {
  // (dY) -> dX of X's shape (the output's), dY placed where the slice read, zeros elsewhere.
  const Value &dy = k.in(0);
  Value &dx = k.out(0);
  SliceSpec s = slice_spec(k, dx.shape);
  CLEAVE_CHECK(dy.shape == s.out, k.label(), ": dY ", shape_str(dy.shape), " vs slice ", shape_str(s.out));
  std::vector<int64_t> src = slice_sources(dx.shape, s);
  for (size_t i = 0; i < src.size(); ++i) dx.data[static_cast<size_t>(src[i])] = dy.data[i];
}

void kernel_Gather(const KernelArgs &k) {
  const Value &data = k.in(0);
  const Value &ind = k.in(1);
  if (data.shape.empty()) CLEAVE_USER_ERROR(k.label(), ": data must have rank >= 1");
  int64_t axis = norm_axis(k, k.op.attr_int("axis", 0), static_cast<int64_t>(data.shape.size()));
  k.expect_out_shape(0, gather_shape(data.shape, ind.shape, axis));
  Value &y = k.out(0);
  for_each_gather(k, data.shape, ind, axis, [&](int64_t src, int64_t dst) { y.data[dst] = data.data[src]; });
}

void kernel_GatherGrad(const KernelArgs &k) {
  // (dY, indices) -> ddata of data's shape (the output's): scatter-add, repeated indices accumulate.
  const Value &dy = k.in(0);
  const Value &ind = k.in(1);
  Value &dd = k.out(0);
  int64_t axis = norm_axis(k, k.op.attr_int("axis", 0), static_cast<int64_t>(dd.shape.size()));
  CLEAVE_CHECK(dy.shape == gather_shape(dd.shape, ind.shape, axis), k.label(), ": dY ", shape_str(dy.shape));
  for_each_gather(k, dd.shape, ind, axis, [&](int64_t src, int64_t dst) { dd.data[src] += dy.data[dst]; });
}

}  // namespace cleave::interp
