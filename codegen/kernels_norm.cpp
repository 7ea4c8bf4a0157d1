// BatchNormalization, softmax and the losses. Softmax splits on any var but its axis with no communication. Split
// on their synced vars (ir/describe/description.h: BatchNorm's batch and spatial dims, a weighted-mean loss's
// positions), the kernels all-reduce per-shard statistics over the ranks holding the other shards and produce whole
// statistics (running and saved stats, dscale, dB, the weighted-mean loss). A plain-mean or sum loss split on its
// positions is an ordinary partial sum: it divides by the global count and the lowering all-reduces it.
#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/describe/description.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

/** The mesh axes of the op's config that split a var some present output's description marks synced. */
std::vector<size_t> synced_axes(const KernelCall &call) {
  const Op &op = call.node();
  std::vector<describe::Description> ds = describe::describe(call.graph(), op);
  std::vector<size_t> axes;
  for (size_t a = 0; a < call.config->vars.size(); ++a) {
    const std::string &name = call.config->vars[a];
    bool synced = false;
    for (size_t k = 0; k < ds.size() && !name.empty(); ++k) {
      int v = op.output(k) == kNoTensor ? -1 : ds[k].var(name);
      if (v >= 0 && ds[k].vars[static_cast<size_t>(v)].synced) synced = true;
    }
    if (synced && call.config->mesh[a] > 1) axes.push_back(a);
  }
  return axes;
}

/** The communicator over the ranks holding the other shards of the synced vars (this rank's mesh coordinates but
 *  along the synced axes, in group order), or "" when no synced var is split. */
std::string sync_comm(const KernelCall &call) {
  std::vector<size_t> axes = synced_axes(call);
  if (axes.empty()) return {};
  const plan::ParallelConfig &c = *call.config;
  std::vector<int64_t> mine = plan::mesh_coords(c.mesh, call.index);
  std::vector<int> ranks;
  for (size_t i = 0; i < c.devices.size(); ++i) {
    std::vector<int64_t> at = plan::mesh_coords(c.mesh, static_cast<int64_t>(i));
    for (size_t a : axes) at[a] = mine[a];
    if (at == mine) ranks.push_back(c.devices[i]);
  }
  return call.comm(ranks);
}

/** `rt::LossShape ls{...}` over the local scores shape. A plain mean divides by the global position count `count`
 *  (every rank of a split batch must); a weighted mean leaves the divisor to the kernel (0 = the local total). */
std::string loss_shape(const Op &op, const Shape &scores, int64_t count) {
  std::string red = op.attr_string("reduction");
  std::string r = red == "none" ? "rt::Reduction::none" : red == "sum" ? "rt::Reduction::sum" : "rt::Reduction::mean";
  bool has_ignore = op.has_attr("ignore_index");
  bool forward = op.kind == OpKind::SoftmaxCrossEntropyLoss || op.kind == OpKind::NegativeLogLikelihoodLoss;
  bool weighted = has_ignore || op.input(forward ? 2 : 3) != kNoTensor;
  return "rt::LossShape ls{" + num(scores[0]) + ", " + num(scores.size() > 1 ? scores[1] : 1) + ", " +
         num(prod(scores, 2)) + ", " + r + ", " + (has_ignore ? "true" : "false") + ", " +
         num(has_ignore ? op.attr_int("ignore_index") : -100) + ", " + num(red == "mean" && !weighted ? count : 0) +
         "};\n";
}

/** The loss kernel's prologue: LossShape over the local shard, and for a weighted mean split over ranks, the
 *  all-reduced weight total as its divisor. `labels`/`weights` are the kernel's operands. */
std::string loss_prologue(const KernelCall &call, const Shape &local_scores, const std::string &labels,
                          const std::string &weights, const std::string &comm) {
  const Op &op = call.node();
  bool forward = op.kind == OpKind::SoftmaxCrossEntropyLoss || op.kind == OpKind::NegativeLogLikelihoodLoss;
  size_t label_slot = forward ? 1 : 2;
  int64_t count = num_elements(call.graph().tensor(op.input(label_slot)).shape);
  std::string code = "{\n" + loss_shape(op, local_scores, count);
  if (!comm.empty())
    code += "rt::sync_loss_divisor(" + comm + ", ls, " + labels + ", " + or_null(weights) + ");\n";
  return code;
}

}  // namespace

bool is_norm_kind(OpKind kind) {
  switch (kind) {
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::SoftmaxCrossEntropyLossGrad:
    case OpKind::NegativeLogLikelihoodLoss:
    case OpKind::NegativeLogLikelihoodLossGrad:
    case OpKind::BatchNormalization:
    case OpKind::BatchNormalizationGrad:
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::SoftmaxGrad:
    case OpKind::LogSoftmaxGrad:
      return true;
    default:
      return false;
  }
}

void check_norm_split(const KernelCall &call) {
  // Softmax's axis and a loss's class var are opaque or internal, so a valid plan never splits them, except the
  // class var of a loss gradient (an output var there): its labels index the whole class dim.
  const Op &op = call.node();
  if ((op.kind == OpKind::SoftmaxCrossEntropyLossGrad || op.kind == OpKind::NegativeLogLikelihoodLossGrad) &&
      !call.axes_splitting("c").empty())
    CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): splitting var c is not supported by codegen "
                      "yet (the labels index the whole class dim)");
}

std::string norm_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  auto has_out = [&](size_t i) { return i < outs.size() && !outs[i].empty(); };
  switch (op.kind) {
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
    case OpKind::SoftmaxGrad:
    case OpKind::LogSoftmaxGrad: {
      const Shape &x = in_shapes[0];
      size_t axis = static_cast<size_t>(op.attr_int("axis", -1) < 0 ? static_cast<int64_t>(x.size()) - 1
                                                                     : op.attr_int("axis", -1));
      bool log = op.kind == OpKind::LogSoftmax || op.kind == OpKind::LogSoftmaxGrad;
      std::string dims = num(prod(x, 0, axis)) + ", " + num(x[axis]) + ", " + num(prod(x, axis + 1));
      if (op.kind == OpKind::Softmax || op.kind == OpKind::LogSoftmax)
        return "rt::softmax_forward(" + dims + ", " + in(0) + ", " + out(0) + ", " + (log ? "true" : "false") + ");";
      return "rt::softmax_backward(" + dims + ", " + in(0) + ", " + in(1) + ", " + out(0) + ", " +
             (log ? "true" : "false") + ");";
    }
    case OpKind::SoftmaxCrossEntropyLoss: {
      std::string comm = sync_comm(call), w = ins.size() > 2 ? ins[2] : "";
      std::string code = loss_prologue(call, in_shapes[0], in(1), w, comm) +
                         "rt::softmax_cross_entropy_forward(ls, " + in(0) + ", " + in(1) + ", " + or_null(w) + ", " +
                         out(0) + ", " + or_null(has_out(1) ? out(1) : "") + ");\n";
      // Each rank's mean over the global total is its share: summed, the loss is whole (synced, never partial).
      if (!comm.empty() && has_out(0)) code += "rt::all_reduce_sum(" + comm + ", " + out(0) + ", " + out(0) + ", 1);\n";
      return code + "}";
    }
    case OpKind::SoftmaxCrossEntropyLossGrad: {
      std::string w = ins.size() > 3 ? ins[3] : "";
      return loss_prologue(call, out_shapes[0], in(2), w, sync_comm(call)) + "rt::softmax_cross_entropy_backward(ls, " +
             in(0) + ", " + in(1) + ", " + in(2) + ", " + or_null(w) + ", " + out(0) + ");\n}";
    }
    case OpKind::NegativeLogLikelihoodLoss: {
      std::string comm = sync_comm(call), w = ins.size() > 2 ? ins[2] : "";
      std::string code = loss_prologue(call, in_shapes[0], in(1), w, comm) + "rt::nll_forward(ls, " + in(0) + ", " +
                         in(1) + ", " + or_null(w) + ", " + out(0) + ");\n";
      if (!comm.empty()) code += "rt::all_reduce_sum(" + comm + ", " + out(0) + ", " + out(0) + ", 1);\n";
      return code + "}";
    }
    case OpKind::NegativeLogLikelihoodLossGrad: {
      std::string w = ins.size() > 3 ? ins[3] : "";
      return loss_prologue(call, out_shapes[0], in(2), w, sync_comm(call)) + "rt::nll_backward(ls, " + in(0) + ", " +
             in(2) + ", " + or_null(w) + ", " + out(0) + ");\n}";
    }
    case OpKind::BatchNormalization: {
      const Shape &x = in_shapes[0];
      std::string n = num(x[0]), c = num(x[1]), d = num(prod(x, 2));
      double eps = op.attr_float("epsilon", 1e-5), momentum = op.attr_float("momentum", 0.9);
      std::string code = "{\n";
      for (size_t o = 1; o <= 2; ++o)
        if (has_out(o)) code += copy_bytes(out(o), in(2 + o), x[1] * dtype_size(real_dtype())) + "\n";
      if (op.attr_int("training_mode", 0) != 0) {
        std::string comm = sync_comm(call);
        const Shape &gx = call.graph().tensor(op.inputs[0]).shape;
        code += comm.empty() ? "rt::batch_norm_train_forward("
                             : "rt::batch_norm_train_forward_synced(" + comm + ", " + num(prod(gx) / gx[1]) + ", ";
        code += n + ", " + c + ", " + d + ", " + in(0) + ", " + in(1) + ", " + in(2) + ", " + float_literal(eps) +
                ", " + float_literal(momentum) + ", " + out(0) + ", " + (has_out(1) ? out(1) : "nullptr") + ", " +
                (has_out(2) ? out(2) : "nullptr") + ", " + (has_out(3) ? out(3) : "nullptr") + ", " +
                (has_out(4) ? out(4) : "nullptr") + (op.attr_int("unbiased_running_var", 0) != 0 ? ", true" : "") +
                ");\n}";
      } else {
        if (has_out(3) || has_out(4))
          CLEAVE_USER_ERROR("op \"", op.name, "\" (BatchNormalization): saved statistics in inference mode are not "
                            "supported by codegen yet");
        code += "rt::batch_norm_infer_forward(" + n + ", " + c + ", " + d + ", " + in(0) + ", " + in(1) + ", " +
                in(2) + ", " + in(3) + ", " + in(4) + ", " + float_literal(eps) + ", " + out(0) + ");\n}";
      }
      return code;
    }
    case OpKind::BatchNormalizationGrad: {
      const Shape &x = in_shapes[1];
      std::string comm = sync_comm(call);
      const Shape &gx = call.graph().tensor(op.inputs[1]).shape;
      std::string code = comm.empty() ? "rt::batch_norm_backward("
                                      : "rt::batch_norm_backward_synced(" + comm + ", " + num(prod(gx) / gx[1]) + ", ";
      return code + num(x[0]) + ", " + num(x[1]) + ", " + num(prod(x, 2)) + ", " + in(0) + ", " + in(1) + ", " +
             or_null(in(2)) + ", " + in(3) + ", " + in(4) + ", " + (has_out(0) ? out(0) : "nullptr") + ", " +
             (has_out(1) ? out(1) : "nullptr") + ", " + (has_out(2) ? out(2) : "nullptr") + ");";
    }
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

std::string norm_validation_code(const KernelCall &call) {
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  switch (op.kind) {
    case OpKind::BatchNormalization: {
      if (op.attr_int("training_mode", 0) == 0) return {};
      const Shape &x = call.in_shapes[0];
      return "rt::batch_norm_infer_forward(" + num(x[0]) + ", " + num(x[1]) + ", " + num(prod(x, 2)) + ", " +
             ins[0] + ", " + ins[1] + ", " + ins[2] + ", " + ins[3] + ", " + ins[4] + ", " +
             float_literal(op.attr_float("epsilon", 1e-5)) + ", " + outs[0] + ");";
    }
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::NegativeLogLikelihoodLoss: {
      // A member whose mesh coordinate along a replicating axis is not 0 holds a copy of another's samples.
      bool counted = true;
      std::vector<int64_t> at = plan::mesh_coords(call.config->mesh, call.index);
      for (size_t a = 0; a < at.size(); ++a)
        if (call.config->vars[a].empty() && at[a] != 0) counted = false;
      const Shape &s = call.in_shapes[0];
      std::string kind = "rt::val::LossKind{" + std::string(op.kind == OpKind::NegativeLogLikelihoodLoss ? "true" : "false") +
                         ", " + (op.has_attr("ignore_index") ? "true, " + num(op.attr_int("ignore_index")) : "false, -100") +
                         "}";
      return "run.add_validation(" + kind + ", vb, " + num(call.in_boxes[0][0].begin) + ", " + num(s[0]) + ", " +
             num(s.size() > 1 ? s[1] : 1) + ", " + num(prod(s, 2)) + ", " + ins[0] + ", " + ins[1] + ", " +
             or_null(ins.size() > 2 ? ins[2] : "") + ", " + (counted ? "true" : "false") + ");";
    }
    default:
      return {};
  }
}

}  // namespace cleave::codegen
