// ArgMax, ArgMin, TopK, CumSum, Mod, OneHot, GatherElements, ScatterElements and GatherND: IR kinds of their own
// (ir/interp/index_ops.cpp, ir/interp/gather_ops.cpp). Axes are normalised, every attribute gets its ONNX default, and
// the inputs that fix a shape or an axis (CumSum's axis, OneHot's depth) must be compile-time constants and become
// attributes.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>

#include "frontend/importer.h"
#include "ir/error.h"

namespace cleave {

void translate_arg_extreme(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  if (rank == 0) n.fail("input must have rank >= 1");
  OpSpec s = same_operands(n, n.op_type == "ArgMax" ? OpKind::ArgMax : OpKind::ArgMin);
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", 0), rank);
  s.attrs["keepdims"] = int64_t{n.attrs.get_int("keepdims", 1) != 0};
  s.attrs["select_last_index"] = int64_t{n.attrs.get_int("select_last_index", 0) != 0};
  im.emit(s, n.name, n);
}

// TopK (opset 10+: K an input) is TopKIndices for the indices output and a GatherElements of X at them for the
// values, so the values' gradient is GatherElements' (a scatter-add onto the chosen positions).
void translate_topk(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(x.size());
  if (rank == 0) n.fail("input must have rank >= 1");
  if (n.opset < 10) n.fail("TopK before opset 10 (K as an attribute) is not supported");
  std::vector<int64_t> k = const_ints(im, n, 1, "\"K\"");
  if (k.size() != 1) n.fail("input \"K\" must hold one value");
  int64_t axis = norm_axis(n, n.attrs.get_int("axis", -1), rank);
  int64_t len = x[static_cast<size_t>(axis)];
  if (k[0] < 1 || k[0] > len)
    n.fail("K = " + std::to_string(k[0]) + " is outside [1, " + std::to_string(len) + "], the length of axis " +
           std::to_string(axis));
  // sorted = 0 leaves the order to the implementation: the sorted order is one.
  std::string indices = n.num_out() > 1 && !n.out(1).empty() ? n.out(1) : im.fresh_tensor_name(n.name + "_indices");
  OpSpec s;
  s.kind = OpKind::TopKIndices;
  s.phase = n.phase;
  s.inputs = {n.in(0)};
  s.outputs = {indices};
  s.attrs["axis"] = axis;
  s.attrs["k"] = k[0];
  s.attrs["largest"] = int64_t{n.attrs.get_int("largest", 1) != 0};
  im.emit(s, n.name, n);
  if (n.out(0).empty()) return;
  OpSpec g;
  g.kind = OpKind::GatherElements;
  g.phase = n.phase;
  g.inputs = {n.in(0), indices};
  g.outputs = {n.out(0)};
  g.attrs["axis"] = axis;
  im.emit(g, im.fresh_op_name(n.name + "_values"), n);
}

void translate_cumsum(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  if (rank == 0) n.fail("input must have rank >= 1");
  std::vector<int64_t> axis = const_ints(im, n, 1, "\"axis\"");
  if (axis.size() != 1) n.fail("input \"axis\" must hold one value");
  OpSpec s = same_operands(n, OpKind::CumSum);
  s.inputs.resize(1);
  s.attrs["axis"] = norm_axis(n, axis[0], rank);
  s.attrs["exclusive"] = int64_t{n.attrs.get_int("exclusive", 0) != 0};
  s.attrs["reverse"] = int64_t{n.attrs.get_int("reverse", 0) != 0};
  im.emit(s, n.name, n);
}

void translate_mod(Importer &im, const NodeCtx &n) {
  OpSpec s = same_operands(n, OpKind::Mod);
  int64_t fmod = n.attrs.get_int("fmod", 0);
  if (fmod != 0 && fmod != 1) n.fail("attribute \"fmod\" must be 0 or 1, got " + std::to_string(fmod));
  // ONNX asks for fmod 1 on floats; fmod 0 on floats is Python's %, as numpy's reference computes it, so it is kept.
  s.attrs["fmod"] = fmod;
  im.emit(s, n.name, n);
}

void translate_onehot(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  std::vector<double> depth = const_doubles(im, n, 1, "\"depth\"");
  if (depth.size() != 1) n.fail("input \"depth\" must hold one value");
  // ONNX: a float depth is truncated to an integer.
  auto d = static_cast<int64_t>(std::trunc(depth[0]));
  if (d < 1) n.fail("depth " + std::to_string(d) + " must be positive");
  OpSpec s;
  s.kind = OpKind::OneHot;
  s.phase = n.phase;
  s.inputs = {n.in(0), n.in(2)};
  s.outputs = {n.out(0)};
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", -1), rank + 1);
  s.attrs["depth"] = d;
  im.emit(s, n.name, n);
}

void translate_gather_elements(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  if (rank == 0) n.fail("data must have rank >= 1");
  OpSpec s = same_operands(n, OpKind::GatherElements);
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", 0), rank);
  im.emit(s, n.name, n);
}

void translate_scatter_elements(Importer &im, const NodeCtx &n) {
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  if (rank == 0) n.fail("data must have rank >= 1");
  // ONNX has the attribute from opset 16 (none, add, mul; max and min from 18); before, updates overwrite.
  std::string reduction = n.attrs.get_string("reduction", "none");
  if (reduction != "none" && reduction != "add")
    throw UserError(n.label + ": reduction \"" + reduction + "\" is not supported (none, add)", 2);
  OpSpec s = same_operands(n, OpKind::ScatterElements);
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", 0), rank);
  s.attrs["reduction"] = reduction;
  im.emit(s, n.name, n);
}

void translate_gather_nd(Importer &im, const NodeCtx &n) {
  const Shape data = im.type_of(n.in(0), n).shape, ind = im.type_of(n.in(1), n).shape;
  int64_t b = n.attrs.get_int("batch_dims", 0);
  auto lim = static_cast<int64_t>(std::min(data.size(), ind.size()));
  if (b < 0 || b >= lim)
    n.fail("batch_dims " + std::to_string(b) + " is out of range for data " + shape_str(data) + " and indices " +
           shape_str(ind));
  OpSpec s = same_operands(n, OpKind::GatherND);
  s.attrs["batch_dims"] = b;
  im.emit(s, n.name, n);
}

}  // namespace cleave
