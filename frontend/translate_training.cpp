// ai.onnx.preview.training: the optimizer ops (IR kinds of the same name, phase update) and Gradient (autodiff).
#include <onnx/onnx_pb.h>

#include "frontend/importer.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {

void translate_optimizer(Importer &im, const NodeCtx &n) {
  OpSpec s = same_operands(n, *parse_op_kind(n.op_type));
  s.phase = Phase::update;
  s.foldable = false;
  // Float attributes are float32 in ONNX: defaults are the float32 values, as an explicit attribute would be.
  const NodeAttrs &a = n.attrs;
  if (n.op_type == "Momentum") {
    s.attrs["alpha"] = a.req_float("alpha");
    s.attrs["beta"] = a.req_float("beta");
    std::string mode = a.req_string("mode");
    if (mode != "standard" && mode != "nesterov")
      n.fail("attribute \"mode\" must be standard or nesterov, got \"" + mode + "\"");
    s.attrs["mode"] = mode;
    s.attrs["norm_coefficient"] = a.req_float("norm_coefficient");
  } else if (n.op_type == "Adam") {
    s.attrs["alpha"] = a.get_float("alpha", double{0.9f});
    s.attrs["beta"] = a.get_float("beta", double{0.999f});
    s.attrs["epsilon"] = a.get_float("epsilon", double{1e-6f});
    s.attrs["norm_coefficient"] = a.get_float("norm_coefficient", 0.0);
    s.attrs["norm_coefficient_post"] = a.get_float("norm_coefficient_post", 0.0);
  } else {  // Adagrad
    s.attrs["decay_factor"] = a.get_float("decay_factor", 0.0);
    s.attrs["epsilon"] = a.get_float("epsilon", double{1e-6f});
    s.attrs["norm_coefficient"] = a.get_float("norm_coefficient", 0.0);
  }
  // (R, T, X..., G..., V...[, H...]) -> (X'..., V'...[, H'...]): the tensor lists must have equal lengths.
  size_t lists = n.op_type == "Adam" ? 3 : 2;
  if (n.num_in() < 2 || (n.num_in() - 2) % (lists + 1) != 0 || n.num_out() != (n.num_in() - 2) / (lists + 1) * lists)
    n.fail(std::to_string(n.num_in()) + " inputs and " + std::to_string(n.num_out()) +
           " outputs do not form equal-length tensor lists");
  im.emit(s, n.name, n);
}

void translate_gradient(Importer &im, const NodeCtx &n) {
  std::vector<std::string> xs = n.attrs.opt_strings("xs").value_or(std::vector<std::string>{});
  if (!n.attrs.has("xs")) n.fail("missing required attribute \"xs\"");
  std::string y = n.attrs.req_string("y");
  if (xs.size() != n.num_out())
    n.fail("has " + std::to_string(n.num_out()) + " outputs for " + std::to_string(xs.size()) + " xs");
  if (!im.defined(y)) n.fail("y \"" + y + "\" is not defined");
  TensorId yid = im.use(y, &n);
  std::vector<TensorId> xids;
  for (const std::string &x : xs) {
    if (!im.defined(x)) n.fail("x \"" + x + "\" is not defined");
    xids.push_back(im.use(x, &n));
  }
  std::map<TensorId, TensorId> grads = append_gradients(im.g, yid, xids);
  // The differentiated scalar is the training's loss: the one `cleave eval` reports per step.
  const Tensor &yt = im.g.tensor(yid);
  if (im.g.loss == kNoTensor && is_float(yt.dtype) && num_elements(yt.shape) == 1) im.g.loss = yid;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::string out = n.out(i);
    if (out.empty()) continue;
    if (im.defined(out)) n.fail("output \"" + out + "\" is already defined");
    const Tensor &x = im.g.tensor(xids[i]);
    auto it = grads.find(xids[i]);
    if (it == grads.end()) {
      // y does not depend on x: its gradient is zero.
      Tensor z{out, x.dtype, x.shape, Role::constant, {}};
      z.data = encode_doubles(x.dtype, std::vector<double>(static_cast<size_t>(num_elements(x.shape)), 0.0));
      im.define_const(std::move(z));
      continue;
    }
    // An Identity gives the gradient the node's output name.
    const Tensor &gt = im.g.tensor(it->second);
    Op op;
    op.name = i == 0 ? n.name : im.fresh_op_name(n.name);
    op.kind = OpKind::Identity;
    op.phase = Phase::backward;
    op.inputs = {it->second};
    op.outputs = {im.define_source(Tensor{out, gt.dtype, gt.shape, Role::grad, {}})};
    im.g.add_op(std::move(op));
  }
}

}  // namespace cleave
