// Elementwise, matrix, softmax and loss ops: mostly one-to-one, with ONNX's attribute defaults made explicit.
#include <onnx/onnx_pb.h>

#include "frontend/importer.h"

namespace cleave {

void translate_elementwise(Importer &im, const NodeCtx &n) {
  std::optional<OpKind> k = parse_op_kind(n.op_type);
  if (!k) n.fail("no IR op");  // unreachable: the op table only routes IR-named ops here
  im.emit(same_operands(n, *k), n.name, n);
}

void translate_matmul(Importer &im, const NodeCtx &n) {
  if (n.op_type == "MatMul") {
    im.emit(same_operands(n, OpKind::MatMul), n.name, n);
    return;
  }
  OpSpec s = same_operands(n, OpKind::Gemm);
  s.attrs["alpha"] = n.attrs.get_float("alpha", 1.0);
  s.attrs["beta"] = n.attrs.get_float("beta", 1.0);
  s.attrs["transA"] = n.attrs.get_int("transA", 0);
  s.attrs["transB"] = n.attrs.get_int("transB", 0);
  im.emit(s, n.name, n);
}

void translate_softmax(Importer &im, const NodeCtx &n) {
  OpSpec s = same_operands(n, n.op_type == "Softmax" ? OpKind::Softmax : OpKind::LogSoftmax);
  auto rank = static_cast<int64_t>(im.type_of(n.in(0), n).shape.size());
  s.attrs["axis"] = norm_axis(n, n.attrs.get_int("axis", -1), rank);
  im.emit(s, n.name, n);
}

void translate_loss(Importer &im, const NodeCtx &n) {
  bool sce = n.op_type == "SoftmaxCrossEntropyLoss";
  OpSpec s = same_operands(n, sce ? OpKind::SoftmaxCrossEntropyLoss : OpKind::NegativeLogLikelihoodLoss);
  std::string reduction = n.attrs.get_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    n.fail("attribute \"reduction\" must be mean, sum or none, got \"" + reduction + "\"");
  s.attrs["reduction"] = reduction;
  if (auto ii = n.attrs.opt_int("ignore_index")) s.attrs["ignore_index"] = *ii;
  if (sce) {
    // Autodiff differentiates through log_prob, so the IR op always has it.
    s.outputs.resize(2);
    if (s.outputs[1].empty()) s.outputs[1] = im.fresh_tensor_name(n.out(0) + ".log_prob");
  }
  im.emit(s, n.name, n);
}

}  // namespace cleave
