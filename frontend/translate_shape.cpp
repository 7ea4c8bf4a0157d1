// Shape-manipulating ops. Their shape/axes/starts/... inputs must be constant (after folding) and become
// normalised IR attributes: no negative axes, final static shapes, clamped slice bounds, explicit split sizes.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontend/importer.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

std::string ints_str(const std::vector<int64_t> &v) { return shape_str(v); }

void emit_reshape(Importer &im, const NodeCtx &n, const Shape &out_shape) {
  OpSpec s;
  s.kind = OpKind::Reshape;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  s.outputs = {n.out(0)};
  s.attrs["shape"] = out_shape;
  im.emit(s, n.name, n);
}

/** Sorted, non-negative, duplicate-free axes. */
std::vector<int64_t> norm_axes(const NodeCtx &n, std::vector<int64_t> axes, int64_t rank) {
  for (int64_t &a : axes) a = norm_axis(n, a, rank, "axis");
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) n.fail("axes " + ints_str(axes) + " repeat an axis");
  return axes;
}

}  // namespace

Shape reshape_target(const NodeCtx &n, const Shape &in, const std::vector<int64_t> &spec, bool allowzero) {
  Shape out(spec.size());
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) n.fail("shape " + ints_str(spec) + " copies dimension " + std::to_string(i) +
                                 " that input of rank " + std::to_string(in.size()) + " lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) n.fail("shape " + ints_str(spec) + " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) n.fail("shape " + ints_str(spec) + " has a negative dimension");
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known)) n.fail("shape " + ints_str(spec) + " overflows int64");
  }
  int64_t total = checked_num_elements(in, n.label + ": input shape");
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      n.fail("cannot reshape " + shape_str(in) + " to " + ints_str(spec));
    out[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    n.fail("cannot reshape " + shape_str(in) + " to " + ints_str(spec));
  }
  return out;
}

void translate_reshape(Importer &im, const NodeCtx &n) {
  Shape in = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(in.size());
  if (n.op_type == "Reshape") {
    std::vector<int64_t> spec = const_ints(im, n, 1, "\"shape\"");
    emit_reshape(im, n, reshape_target(n, in, spec, n.attrs.get_int("allowzero", 0) != 0));
  } else if (n.op_type == "Flatten") {
    int64_t axis = n.attrs.get_int("axis", 1);
    if (axis < -rank || axis > rank) n.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                                            std::to_string(rank));
    if (axis < 0) axis += rank;
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= in[static_cast<size_t>(i)];
    emit_reshape(im, n, {a, b});
  } else if (n.op_type == "Squeeze") {
    std::vector<int64_t> axes;
    if (!n.in(1).empty()) {
      axes = norm_axes(n, const_ints(im, n, 1, "\"axes\""), rank);
    } else {
      for (int64_t i = 0; i < rank; ++i)
        if (in[static_cast<size_t>(i)] == 1) axes.push_back(i);
    }
    Shape out;
    for (int64_t i = 0; i < rank; ++i) {
      bool drop = std::binary_search(axes.begin(), axes.end(), i);
      if (drop && in[static_cast<size_t>(i)] != 1)
        n.fail("cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(in[static_cast<size_t>(i)]));
      if (!drop) out.push_back(in[static_cast<size_t>(i)]);
    }
    emit_reshape(im, n, out);
  } else {  // Unsqueeze
    std::vector<int64_t> raw = const_ints(im, n, 1, "\"axes\"");
    int64_t out_rank = rank + static_cast<int64_t>(raw.size());
    std::vector<int64_t> axes = norm_axes(n, raw, out_rank);
    Shape out;
    size_t src = 0;
    for (int64_t i = 0; i < out_rank; ++i)
      out.push_back(std::binary_search(axes.begin(), axes.end(), i) ? 1 : in[src++]);
    emit_reshape(im, n, out);
  }
}

void translate_transpose(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
  if (auto p = n.attrs.opt_ints("perm")) {
    perm = *p;
    std::vector<int64_t> sorted = perm;
    for (int64_t &a : sorted) a = norm_axis(n, a, rank, "perm entry");
    perm = sorted;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i)
      if (sorted.size() != static_cast<size_t>(rank) || sorted[static_cast<size_t>(i)] != i)
        n.fail("attribute \"perm\" " + ints_str(*p) + " is not a permutation of rank " + std::to_string(rank));
  }
  OpSpec s = same_operands(n, OpKind::Transpose);
  s.attrs["perm"] = perm;
  im.emit(s, n.name, n);
}

void translate_concat(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  OpSpec s = same_operands(n, OpKind::Concat);
  s.attrs["axis"] = norm_axis(n, n.attrs.req_int("axis"), rank);
  im.emit(s, n.name, n);
}

void translate_split(Importer &im, const NodeCtx &n) {
  Shape in = im.type_of(n.in(0), n).shape;
  int64_t axis = norm_axis(n, n.attrs.get_int("axis", 0), static_cast<int64_t>(in.size()));
  int64_t dim = in[static_cast<size_t>(axis)];
  auto parts = static_cast<int64_t>(n.num_out());
  std::vector<int64_t> split;
  if (!n.in(1).empty()) {
    split = const_ints(im, n, 1, "\"split\"");
    if (static_cast<int64_t>(split.size()) != parts)
      n.fail("split " + ints_str(split) + " has " + std::to_string(split.size()) + " entries for " +
             std::to_string(parts) + " outputs");
    int64_t sum = 0;
    for (int64_t v : split) {
      if (v < 0) n.fail("split " + ints_str(split) + " has a negative size");
      sum += v;
    }
    if (sum != dim) n.fail("split " + ints_str(split) + " does not add up to dimension " + std::to_string(dim));
  } else {
    if (parts == 0 || dim % parts != 0)
      n.fail("dimension " + std::to_string(dim) + " cannot be split evenly into " + std::to_string(parts) + " outputs");
    split.assign(static_cast<size_t>(parts), dim / parts);
  }
  OpSpec s;
  s.kind = OpKind::Split;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  for (size_t i = 0; i < n.num_out(); ++i) s.outputs.push_back(n.out(i));
  s.attrs["axis"] = axis;
  s.attrs["split"] = split;
  im.emit(s, n.name, n);
}

void translate_slice(Importer &im, const NodeCtx &n) {
  Shape in = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts = const_ints(im, n, 1, "\"starts\"");
  std::vector<int64_t> ends = const_ints(im, n, 2, "\"ends\"");
  std::vector<int64_t> axes, steps;
  if (!n.in(3).empty()) axes = const_ints(im, n, 3, "\"axes\"");
  else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (!n.in(4).empty()) steps = const_ints(im, n, 4, "\"steps\"");
  else steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    n.fail("starts, ends, axes and steps have different lengths");
  // Sort by axis so the attributes are canonical.
  std::vector<size_t> order(starts.size());
  std::iota(order.begin(), order.end(), 0);
  for (int64_t &a : axes) a = norm_axis(n, a, rank);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return axes[a] < axes[b]; });
  std::vector<int64_t> o_starts, o_ends, o_axes, o_steps;
  for (size_t k = 0; k < order.size(); ++k) {
    size_t i = order[k];
    if (k > 0 && axes[i] == o_axes.back()) n.fail("axes repeat axis " + std::to_string(axes[i]));
    int64_t dim = in[static_cast<size_t>(axes[i])], step = steps[i];
    if (step == 0) n.fail("step 0 on axis " + std::to_string(axes[i]));
    // ONNX Slice: negative bounds count from the end, then clamp to [0, dim] (step > 0) or
    // starts to [0, dim - 1] and ends to [-1, dim - 1] (step < 0; -1 = before the first element).
    int64_t st = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t en = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (dim == 0) {
      st = en = 0;
    } else if (step > 0) {
      st = std::clamp<int64_t>(st, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
    } else {
      st = std::clamp<int64_t>(st, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
    }
    o_starts.push_back(st);
    o_ends.push_back(en);
    o_axes.push_back(axes[i]);
    o_steps.push_back(step);
  }
  OpSpec s;
  s.kind = OpKind::Slice;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  s.outputs = {n.out(0)};
  s.attrs["starts"] = o_starts;
  s.attrs["ends"] = o_ends;
  s.attrs["axes"] = o_axes;
  s.attrs["steps"] = o_steps;
  im.emit(s, n.name, n);
}

void translate_gather(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  OpSpec s = same_operands(n, OpKind::Gather);
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", 0), rank);
  im.emit(s, n.name, n);
}

void translate_expand(Importer &im, const NodeCtx &n) {
  Shape in = im.type_of(n.in(0), n).shape;
  std::vector<int64_t> target = const_ints(im, n, 1, "\"shape\"");
  // ONNX Expand broadcasts input and shape against each other (a 1 in `shape` keeps the input's dim).
  size_t rank = std::max(in.size(), target.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i + in.size() >= rank ? in[i + in.size() - rank] : 1;
    int64_t b = i + target.size() >= rank ? target[i + target.size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      n.fail("cannot expand " + shape_str(in) + " to " + ints_str(target));
    out[i] = a == 1 ? b : a;
  }
  OpSpec s;
  s.kind = OpKind::Expand;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  s.outputs = {n.out(0)};
  s.attrs["shape"] = out;
  im.emit(s, n.name, n);
}

void translate_constant(Importer &im, const NodeCtx &n) {
  Tensor t;
  if (n.op_type == "ConstantOfShape") {
    std::vector<int64_t> shape = const_ints(im, n, 0, "\"input\"");
    t.dtype = DType::f32;
    std::vector<double> fill{0.0};
    if (const onnx::TensorProto *v = n.attrs.opt_tensor("value")) {
      Tensor one = tensor_from_proto(*v, "", n.label + ": attribute \"value\"");
      if (num_elements(one.shape) != 1) n.fail("attribute \"value\" must hold one element");
      t.dtype = one.dtype;
      fill = data_as_doubles(one);
    }
    t.shape = shape;
    int64_t count = checked_num_elements(shape, n.label + ": shape");
    t.data = encode_doubles(t.dtype, std::vector<double>(static_cast<size_t>(count), fill[0]));
  } else if (const onnx::TensorProto *v = n.attrs.opt_tensor("value")) {
    t = tensor_from_proto(*v, "", n.label + ": attribute \"value\"");
  } else if (auto f = n.attrs.opt_float("value_float")) {
    t.dtype = DType::f32;
    t.data = encode_doubles(DType::f32, {*f});
  } else if (auto fs = n.attrs.opt_floats("value_floats")) {
    t.dtype = DType::f32;
    t.shape = {static_cast<int64_t>(fs->size())};
    t.data = encode_doubles(DType::f32, *fs);
  } else if (auto i = n.attrs.opt_int("value_int")) {
    t.dtype = DType::i64;
    t.data = encode_ints(DType::i64, {*i});
  } else if (auto is = n.attrs.opt_ints("value_ints")) {
    t.dtype = DType::i64;
    t.shape = {static_cast<int64_t>(is->size())};
    t.data = encode_ints(DType::i64, *is);
  } else {
    for (const char *a : {"sparse_value", "value_string", "value_strings"})
      if (n.attrs.has(a)) throw UserError(n.label + ": attribute \"" + std::string(a) + "\" is not supported", 2);
    n.fail("needs one of the attributes value, value_float(s), value_int(s)");
  }
  t.name = n.out(0);
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

void translate_shape(Importer &im, const NodeCtx &n) {
  Shape in = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(in.size());
  if (n.op_type == "Size") {
    Tensor t{n.out(0), DType::i64, {}, Role::constant, {}};
    t.data = encode_ints(DType::i64, {checked_num_elements(in, n.label + ": input shape")});
    if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
    im.define_const(std::move(t));
    return;
  }
  // Shape-15 start/end: clamp like Slice.
  int64_t start = n.attrs.get_int("start", 0), end = n.attrs.get_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Tensor t;
  t.name = n.out(0);
  t.dtype = DType::i64;
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(in[static_cast<size_t>(i)]);
  t.shape = {static_cast<int64_t>(dims.size())};
  t.data = encode_ints(DType::i64, dims);
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

void translate_range(Importer &im, const NodeCtx &n) {
  // Shapes are static, so Range's length must be known: its inputs must be compile-time constants (the usual
  // "must be a compile-time constant" error otherwise).
  TensorType st = im.type_of(n.in(0), n);
  double start = 0, limit = 0, delta = 0;
  for (size_t i = 0; i < 3; ++i) {
    static const char *kNames[] = {"\"start\"", "\"limit\"", "\"delta\""};
    std::vector<double> v = const_doubles(im, n, i, kNames[i]);
    if (v.size() != 1) n.fail(std::string("input ") + kNames[i] + " must be a scalar");
    (i == 0 ? start : i == 1 ? limit : delta) = v[0];
  }
  if (delta == 0) n.fail("delta is 0");
  double len = std::ceil((limit - start) / delta);
  if (len > 1e9) n.fail("Range of " + std::to_string(len) + " elements is too long");
  int64_t count = len > 0 ? static_cast<int64_t>(len) : 0;
  std::vector<double> values;
  // ONNX: element i = start + i * delta, computed in the input type (integers stay exact).
  for (int64_t i = 0; i < count; ++i) values.push_back(start + static_cast<double>(i) * delta);
  Tensor t{n.out(0), st.dtype, {count}, Role::constant, {}};
  t.data = is_float(st.dtype) ? encode_doubles(st.dtype, values)
                              : encode_ints(st.dtype, std::vector<int64_t>(values.begin(), values.end()));
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

void translate_trilu(Importer &im, const NodeCtx &n) {
  // A Trilu of a constant (torch's causal masks: torch.triu(torch.ones(T, T))) folds; of run-time values it is
  // Where(keep, x, 0) with `keep` the constant [rows, cols] mask, so its gradient and splits are Where's.
  Shape shape = im.type_of(n.in(0), n).shape;
  if (shape.size() < 2) n.fail("input must have rank >= 2, got " + shape_str(shape));
  int64_t k = 0;
  if (!n.in(1).empty()) {
    std::vector<int64_t> kv = const_ints(im, n, 1, "\"k\"");
    if (kv.size() != 1) n.fail("input \"k\" must be a scalar");
    k = kv[0];
  }
  bool upper = n.attrs.get_int("upper", 1) != 0;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  auto keep = [&](int64_t i, int64_t j) { return upper ? j - i >= k : j - i <= k; };
  if (!im.is_const(n.in(0))) {
    DType dt = im.type_of(n.in(0), n).dtype;
    Tensor mask{im.fresh_tensor_name(n.out(0) + ".keep"), DType::boolean, {rows, cols}, Role::constant, {}};
    std::vector<int64_t> bits;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) bits.push_back(keep(i, j) ? 1 : 0);
    mask.data = encode_ints(DType::boolean, bits);
    Tensor zero{im.fresh_tensor_name(n.out(0) + ".zero"), dt, {}, Role::constant, {}};
    zero.data = is_float(dt) ? encode_doubles(dt, {0.0}) : encode_ints(dt, {0});
    OpSpec s;
    s.kind = OpKind::Where;
    s.phase = n.phase;
    s.inputs = {mask.name, n.in(0), zero.name};
    s.outputs = {n.out(0)};
    im.define_const(std::move(mask));
    im.define_const(std::move(zero));
    im.emit(s, n.name, n);
    return;
  }
  const Tensor *x = im.known_value(n.in(0));
  Tensor t = *x;
  t.name = n.out(0);
  std::vector<double> v = data_as_doubles(*x);
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t j = static_cast<int64_t>(e) % cols, i = static_cast<int64_t>(e) / cols % rows;
    if (!keep(i, j)) v[e] = 0;
  }
  t.data = is_float(t.dtype) ? encode_doubles(t.dtype, v) : encode_ints(t.dtype, std::vector<int64_t>(v.begin(), v.end()));
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

namespace {
/** out[indices[i]...] = (or op=) updates[i...]: ONNX ScatterND over one value type. */
template <typename T>
std::vector<T> scatter_nd(const NodeCtx &n, std::vector<T> out, const Shape &data, const std::vector<int64_t> &idx,
                          const Shape &idx_shape, const std::vector<T> &upd, const std::string &reduction) {
  auto k = static_cast<size_t>(idx_shape.back());
  int64_t slice = 1;
  for (size_t d = k; d < data.size(); ++d) slice *= data[d];
  size_t tuples = 1;  // k == 0 (whole-data updates) still has one tuple per leading index
  for (size_t d = 0; d + 1 < idx_shape.size(); ++d) tuples *= static_cast<size_t>(idx_shape[d]);
  for (size_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) {
      int64_t i = idx[t * k + d];
      if (i < -data[d] || i >= data[d])
        n.fail("index " + std::to_string(i) + " is out of range for dimension " + std::to_string(d) + " of size " +
               std::to_string(data[d]));
      base = base * data[d] + (i < 0 ? i + data[d] : i);
    }
    base *= slice;
    for (int64_t e = 0; e < slice; ++e) {
      T &o = out[static_cast<size_t>(base + e)];
      T u = upd[t * static_cast<size_t>(slice) + static_cast<size_t>(e)];
      if (reduction == "add") o += u;
      else if (reduction == "mul") o *= u;
      else if (reduction == "max") o = std::max(o, u);
      else if (reduction == "min") o = std::min(o, u);
      else o = u;
    }
  }
  return out;
}
}  // namespace

void translate_scatter_nd(Importer &im, const NodeCtx &n) {
  // torch exports an in-place slice assignment of a tensor it built itself (Swin's shifted-window attention mask:
  // `mask[h0:h1, w0:w1] = count` on new_zeros) as ScatterND of constants: fold it. Of run-time values it would need
  // a kernel and a gradient of its own.
  const_doubles(im, n, 0, "\"data\"");  // the standard errors when an input is not known at compile time
  std::vector<int64_t> idx = const_ints(im, n, 1, "\"indices\"");
  const_doubles(im, n, 2, "\"updates\"");
  for (size_t i : {size_t{0}, size_t{2}})
    if (!im.is_const(n.in(i)))
      throw UserError(n.label + ": ScatterND of a trainable initializer is not supported (only of constants)", 2);
  const Tensor &x = *im.known_value(n.in(0));
  const Tensor &u = *im.known_value(n.in(2));
  Shape idx_shape = im.known_value(n.in(1))->shape;
  std::string reduction = n.attrs.get_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    n.fail("attribute \"reduction\" must be none, add, mul, max or min, got \"" + reduction + "\"");
  if (idx_shape.empty()) n.fail("input \"indices\" must have rank >= 1");
  int64_t k = idx_shape.back();
  if (k < 0 || k > static_cast<int64_t>(x.shape.size()))
    n.fail("indices' last dimension " + std::to_string(k) + " exceeds the data's rank " +
           std::to_string(x.shape.size()));
  Shape want(idx_shape.begin(), idx_shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  if (u.shape != want)
    n.fail("updates have shape " + shape_str(u.shape) + ", expected " + shape_str(want) + " (indices " +
           shape_str(idx_shape) + ", data " + shape_str(x.shape) + ")");
  if (u.dtype != x.dtype) n.fail("updates and data have different types");
  Tensor t = x;
  t.name = n.out(0);
  if (is_float(x.dtype))
    t.data = encode_doubles(x.dtype, scatter_nd(n, data_as_doubles(x), x.shape, idx, idx_shape, data_as_doubles(u),
                                                reduction));
  else
    t.data = encode_ints(x.dtype, scatter_nd(n, data_as_ints(x), x.shape, idx, idx_shape, data_as_ints(u), reduction));
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

void translate_reduce_prod(Importer &im, const NodeCtx &n) {
  // torch exports var/std's element count as ReduceProd of a Shape's dims, known at compile time: fold it. Of
  // run-time values (and trainable initializers) it is lowered to products of slices (translate_lowered.cpp).
  if (!im.is_const(n.in(0))) {
    lower_reduce_prod(im, n);
    return;
  }
  const Tensor &x = *im.known_value(n.in(0));
  auto rank = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes;
  if (n.opset >= 18 && !n.in(1).empty()) axes = const_ints(im, n, 1, "\"axes\"");
  else axes = n.attrs.opt_ints("axes").value_or(std::vector<int64_t>{});
  bool keepdims = n.attrs.get_int("keepdims", 1) != 0;
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  if (axes.empty() && n.attrs.get_int("noop_with_empty_axes", 0) != 0) reduced.assign(reduced.size(), false);
  for (int64_t a : axes) reduced[static_cast<size_t>(norm_axis(n, a, rank))] = true;
  Shape out_shape, kept_strides;  // per input dim, its stride in the output (0 where reduced)
  int64_t stride = 1;
  kept_strides.assign(static_cast<size_t>(rank), 0);
  for (int64_t d = rank; d-- > 0;)
    if (!reduced[static_cast<size_t>(d)]) {
      kept_strides[static_cast<size_t>(d)] = stride;
      stride *= x.shape[static_cast<size_t>(d)];
    }
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) out_shape.push_back(x.shape[static_cast<size_t>(d)]);
    else if (keepdims) out_shape.push_back(1);
  std::vector<double> v = data_as_doubles(x), out(static_cast<size_t>(stride), 1.0);
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t rest = static_cast<int64_t>(e), o = 0;
    for (int64_t d = rank; d-- > 0;) {
      o += rest % x.shape[static_cast<size_t>(d)] * kept_strides[static_cast<size_t>(d)];
      rest /= x.shape[static_cast<size_t>(d)];
    }
    out[static_cast<size_t>(o)] *= v[e];
  }
  Tensor t{n.out(0), x.dtype, out_shape, Role::constant, {}};
  t.data = is_float(x.dtype) ? encode_doubles(x.dtype, out)
                             : encode_ints(x.dtype, std::vector<int64_t>(out.begin(), out.end()));
  if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
  im.define_const(std::move(t));
}

void translate_cast(Importer &im, const NodeCtx &n) {
  // CastLike takes its target type from its second input.
  DType target;
  if (n.op_type == "CastLike") {
    target = im.type_of(n.in(1), n).dtype;
  } else {
    int64_t to = n.attrs.req_int("to");
    std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt)
      throw UserError(n.label + ": cast to " + onnx_dtype_name(static_cast<int32_t>(to)) + " is not supported", 2);
    target = *dt;
  }
  TensorType in = im.type_of(n.in(0), n);
  if (const Tensor *v = im.known_value(n.in(0)); v && im.is_const(n.in(0))) {
    Tensor t;
    t.name = n.out(0);
    t.dtype = target;
    t.shape = v->shape;
    // Integer targets truncate toward zero (ONNX Cast); encode_* do exactly that.
    t.data = is_float(v->dtype) ? encode_doubles(target, data_as_doubles(*v)) : encode_ints(target, data_as_ints(*v));
    if (im.defined(t.name)) n.fail("output \"" + t.name + "\" is already defined");
    im.define_const(std::move(t));
    return;
  }
  OpSpec s = same_operands(n, in.dtype == target ? OpKind::Identity : OpKind::Cast);
  s.inputs.resize(1);
  if (in.dtype != target) s.attrs["to"] = std::string(dtype_name(target));
  im.emit(s, n.name, n);
}

}  // namespace cleave
