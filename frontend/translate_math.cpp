// Elementwise, matrix, softmax and loss ops: mostly one-to-one, with ONNX's attribute defaults made explicit.
#include <onnx/onnx_pb.h>

#include "frontend/importer.h"
#include "frontend/interleaved_rows.h"

namespace cleave {

void translate_elementwise(Importer &im, const NodeCtx &n) {
  std::optional<OpKind> k = parse_op_kind(n.op_type);
  if (!k) n.fail("no IR op");  // unreachable: the op table only routes IR-named ops here
  im.emit(same_operands(n, *k), n.name, n);
}

namespace {

/** X W^T for a MatMul of X [..., k] by the pending transpose of a 2-D W: X's leading dims folded into rows (Reshape, free
 *  in codegen), Gemm(X, W, transB), the rows unfolded. False (nothing emitted) where the shapes do not allow it, or
 *  where X's batch is in a dim after the first: the rows would interleave samples, and data parallelism could not
 *  split them (torch's attention projects time-major activations). */
bool matmul_by_transposed(Importer &im, const NodeCtx &n, const std::string &w) {
  Shape x = im.type_of(n.in(0), n).shape, ws = im.type_of(w, n).shape;
  if (x.size() < 2 || ws.size() != 2 || x.back() != ws[1]) return false;
  if (x.size() > 2 && rows_interleave_samples(im, n.in(0))) return false;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.size(); ++d) rows *= x[d];
  auto reshape = [&](const std::string &in, const std::string &out, const Shape &shape) {
    OpSpec s;
    s.kind = OpKind::Reshape;
    s.phase = n.phase;
    s.inputs = {in};
    s.outputs = {out};
    s.attrs["shape"] = std::vector<int64_t>(shape);
    im.emit(s, im.fresh_op_name(n.name), n);
  };
  bool fold = x.size() > 2;
  std::string x2 = fold ? im.fresh_tensor_name(n.out(0) + ".rows_in") : n.in(0);
  std::string y2 = fold ? im.fresh_tensor_name(n.out(0) + ".rows") : n.out(0);
  if (fold) reshape(n.in(0), x2, {rows, x.back()});
  OpSpec g;
  g.kind = OpKind::Gemm;
  g.phase = n.phase;
  g.inputs = {x2, w};
  g.outputs = {y2};
  g.attrs = {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t{0}}, {"transB", int64_t{1}}};
  im.emit(g, n.name, n);
  if (fold) {
    Shape y(x.begin(), x.end() - 1);
    y.push_back(ws[0]);
    reshape(y2, n.out(0), y);
  }
  return true;
}

}  // namespace

void translate_matmul(Importer &im, const NodeCtx &n) {
  if (n.op_type == "MatMul") {
    OpSpec s = same_operands(n, OpKind::MatMul);
    for (size_t i = 0; i < 2; ++i) {
      auto pt = im.pending_transposes.find(n.in(i));
      if (pt == im.pending_transposes.end()) continue;
      const std::string &x = pt->second;
      bool weight = i == 1 && im.pending_transposes.count(n.in(0)) == 0 && im.type_of(x, n).shape.size() == 2;
      if (weight && matmul_by_transposed(im, n, x)) return;
      s.inputs[i] = x;
      s.attrs[i == 0 ? "transA" : "transB"] = int64_t{1};
    }
    im.emit(s, n.name, n);
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
