#include "ir/autodiff/grad_context.h"

#include <algorithm>
#include <numeric>

#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave::autodiff_detail {

Shape broadcast_shape(const Shape &a, const Shape &b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    CLEAVE_CHECK(da == db || da == 1 || db == 1, "shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

GradContext::GradContext(Graph &g, OpId fwd, std::vector<TensorId> dy, std::vector<bool> need,
                         const std::vector<int> &batch)
    : g_(g), fwd_(fwd), dy_(std::move(dy)), need_(std::move(need)), batch_(batch) {}

std::string GradContext::grad_name(size_t i) const { return g_.tensor(in(i)).name + ".grad"; }

std::string GradContext::tensor_name(const std::string &hint) const {
  return g_.fresh_tensor_name(hint.empty() ? fwd().name + ".grad.tmp" : hint);
}

TensorId GradContext::value_out(size_t i) const {
  TensorId y = out(i);
  if (y == kNoTensor || std::find(g_.outputs.begin(), g_.outputs.end(), y) != g_.outputs.end()) return y;
  std::vector<OpId> readers = g_.consumers(y);
  if (readers.size() != 1) return y;
  // Only the rounding of the op's own low-precision result, which autocast names after it (`<y>.f32` -> `<y>`): a
  // float32 result (autocast's float32 lists) cast for a GEMM that reads it is kept as float32 for the backward.
  const Op &r = g_.op(readers[0]);
  bool rounds = r.kind == OpKind::RoundToBf16 || r.kind == OpKind::RoundToFp16;
  if (!rounds || r.phase != Phase::forward || g_.tensor(y).name != g_.tensor(r.output(0)).name + ".f32") return y;
  return r.output(0);
}

TensorId GradContext::emit(OpKind kind, std::vector<TensorId> ins, AttrMap attrs, DType dt, Shape shape,
                           const std::string &hint) {
  return emit_multi(kind, std::move(ins), std::move(attrs), {true}, {dt}, {std::move(shape)}, {hint})[0];
}

std::vector<TensorId> GradContext::emit_multi(OpKind kind, std::vector<TensorId> ins, AttrMap attrs,
                                              const std::vector<bool> &present, const std::vector<DType> &dts,
                                              const std::vector<Shape> &shapes,
                                              const std::vector<std::string> &hints) {
  CLEAVE_CHECK(present.size() == dts.size() && dts.size() == shapes.size() && shapes.size() == hints.size());
  Op op;
  op.name = g_.fresh_op_name(fwd().name + ".grad");
  op.kind = kind;
  op.inputs = std::move(ins);
  op.attrs = std::move(attrs);
  op.phase = Phase::backward;
  op.group = fwd_;
  for (size_t i = 0; i < present.size(); ++i)
    op.outputs.push_back(present[i] ? g_.add_tensor(tensor_name(hints[i]), dts[i], shapes[i], Role::grad)
                                    : kNoTensor);
  // Trailing absent outputs are dropped, as an importer would.
  while (!op.outputs.empty() && op.outputs.back() == kNoTensor) op.outputs.pop_back();
  std::vector<TensorId> outs = op.outputs;
  outs.resize(present.size(), kNoTensor);
  g_.add_op(std::move(op));
  return outs;
}

TensorId GradContext::constant(double v, DType dt, const Shape &shape) {
  Tensor t;
  t.name = g_.fresh_tensor_name(fwd().name + ".grad.const");
  t.dtype = dt;
  t.shape = shape;
  t.role = Role::constant;
  t.data = encode_doubles(dt, std::vector<double>(static_cast<size_t>(num_elements(shape)), v));
  return g_.add_tensor(std::move(t));
}

TensorId GradContext::unary(OpKind kind, TensorId x, const std::string &hint) {
  return emit(kind, {x}, {}, dtype(x), shape(x), hint);
}

TensorId GradContext::binary(OpKind kind, TensorId a, TensorId b, const std::string &hint) {
  return emit(kind, {a, b}, {}, dtype(a), broadcast_shape(shape(a), shape(b)), hint);
}

TensorId GradContext::reshape(TensorId x, const Shape &s, const std::string &hint) {
  if (shape(x) == s) return x;
  return emit(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>(s)}}, dtype(x), s, hint);
}

TensorId GradContext::expand(TensorId x, const Shape &s, const std::string &hint) {
  if (shape(x) == s) return x;
  return emit(OpKind::Expand, {x}, {{"shape", std::vector<int64_t>(s)}}, dtype(x), broadcast_shape(shape(x), s),
              hint);
}

TensorId GradContext::reduce_sum(TensorId x, const std::vector<int64_t> &axes, bool keepdims,
                                 const std::string &hint) {
  if (axes.empty()) return x;
  Shape out;
  const Shape &in_shape = shape(x);
  for (size_t d = 0; d < in_shape.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!reduced)
      out.push_back(in_shape[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return emit(OpKind::ReduceSum, {x}, {{"axes", axes}, {"keepdims", int64_t{keepdims ? 1 : 0}}}, dtype(x), out,
              hint);
}

TensorId GradContext::sum_to(TensorId x, const Shape &target, const std::string &hint) {
  const Shape &from = shape(x);
  if (from == target) return x;
  CLEAVE_CHECK(from.size() >= target.size(), "cannot sum ", shape_str(from), " to ", shape_str(target));
  size_t lead = from.size() - target.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < from.size(); ++d)
    if (d < lead || (target[d - lead] == 1 && from[d] != 1)) axes.push_back(static_cast<int64_t>(d));
  if (lead == 0) return reduce_sum(x, axes, true, hint);
  // Only leading dims reduced (the common bias case): one ReduceSum without keepdims.
  if (axes.size() == lead) return reduce_sum(x, axes, false, hint);
  // Otherwise keep dims so the reduction is one op whatever the axes, then drop the leading ones with a Reshape.
  TensorId r = reduce_sum(x, axes, true);
  return reshape(r, target, hint);
}

TensorId GradContext::transpose(TensorId x, const std::vector<int64_t> &perm, const std::string &hint) {
  // Transposing back what a Transpose made is its input (torch's time-major attention transposes its input and its
  // output's gradient, and the MatMul rule moves the batch back to the front). A named result stays an op of its own.
  if (OpId p = g_.tensor(x).producer; hint.empty() && p != kNoOp && g_.op(p).kind == OpKind::Transpose) {
    std::vector<int64_t> reversed(perm.size());
    std::iota(reversed.rbegin(), reversed.rend(), 0);  // a Transpose without perm reverses the dims
    const std::vector<int64_t> first = g_.op(p).attr_ints("perm", reversed);
    bool inverse = first.size() == perm.size();
    for (size_t i = 0; inverse && i < perm.size(); ++i)
      inverse = first[static_cast<size_t>(perm[i])] == static_cast<int64_t>(i);
    if (inverse) return g_.op(p).inputs[0];
  }
  Shape out;
  for (int64_t p : perm) out.push_back(shape(x)[static_cast<size_t>(p)]);
  return emit(OpKind::Transpose, {x}, {{"perm", perm}}, dtype(x), out, hint);
}

TensorId GradContext::matmul(TensorId a, TensorId b, const std::string &hint, bool ta, bool tb) {
  const Shape &sa = shape(a), &sb = shape(b);
  CLEAVE_CHECK(sa.size() >= 2 && sb.size() >= 2);
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape out = broadcast_shape(ba, bb);
  out.push_back(ta ? sa.back() : sa[sa.size() - 2]);
  out.push_back(tb ? sb[sb.size() - 2] : sb.back());
  AttrMap attrs;  // absent flags print as before
  if (ta) attrs["transA"] = int64_t{1};
  if (tb) attrs["transB"] = int64_t{1};
  return emit(OpKind::MatMul, {a, b}, attrs, dtype(a), out, hint);
}

TensorId GradContext::scale(TensorId x, double v, const std::string &hint) {
  if (v == 1.0) return x;
  return binary(OpKind::Mul, x, constant(v, dtype(x)), hint);
}

}  // namespace cleave::autodiff_detail
