// Conv, ConvTranspose, pools and their gradients, on whole tensors or on spatial blocks (Tofu/ParaDL spatial
// parallelism). Region analysis (planner/plan/region.h) gives every operand's box with its halo, clipped to the
// tensor; the kernels run on those blocks with a local geometry derived here from the boxes: local pads for
// convolutions (rt::ConvShape), the blocks' global positions for pools (rt::PoolShape's block fields), the whole op's
// divisor for global average pooling.
#include <array>

#include "codegen/kernels.h"
#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

using namespace kernel_util;

namespace {

/** One operand as this rank holds it: its local shape, the global box that is, and the whole tensor's shape. */
struct Part {
  Shape local;
  plan::Box box;
  Shape full;
};

Part in_part(const KernelCall &call, size_t slot) {
  return {call.in_shapes.at(slot), call.in_boxes.at(slot), call.graph().tensor(call.node().input(slot)).shape};
}
Part out_part(const KernelCall &call, size_t slot) {
  return {call.out_shapes.at(slot), call.out_boxes.at(slot), call.graph().tensor(call.node().output(slot)).shape};
}

bool whole_dim(const Part &p, size_t d) { return p.box[d].begin == 0 && p.box[d].end == p.full[d]; }

bool spatial_whole(const Part &p) {
  for (size_t d = 2; d < p.full.size(); ++d)
    if (!whole_dim(p, d)) return false;
  return true;
}

std::vector<int64_t> spatial_begins(const Part &p) {
  std::vector<int64_t> b;
  for (size_t d = 2; d < p.box.size(); ++d) b.push_back(p.box[d].begin);
  return b;
}

/** The ConvShape of the local blocks of X, W and Y (whichever of them is the output). The global window reads input
 *  o*s + k*dil - pad at output o and tap k, so local output ol at local tap kl reads local input
 *  ol*s + kl*dil - (pad + x0 - o0*s - k0*dil), (x0, o0, k0 the blocks' first positions): that is the local begin pad,
 *  negative when a dX block starts past the first row its dY block reaches. The end pad makes rt's output-size rule
 *  give the local output extent. Dims every block holds whole keep the op's pads. */
std::string conv_shape(const KernelCall &call, const Part &x, const Part &w, const Part &y) {
  const Op &op = call.node();
  size_t sp = x.local.size() - 2;
  std::vector<int64_t> strides = op.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = op.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> dil = op.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  for (size_t d = 0; d < sp; ++d) {
    size_t k = d + 2;
    if (whole_dim(x, k) && whole_dim(w, k) && whole_dim(y, k)) continue;
    int64_t begin = pads[d] + x.box[k].begin - y.box[k].begin * strides[d] - w.box[k].begin * dil[d];
    pads[d] = begin;
    pads[d + sp] = (y.local[k] - 1) * strides[d] + dil[d] * (w.local[k] - 1) + 1 - x.local[k] - begin;
  }
  // A split by channel group runs its share of the groups (with one group, channel splits keep it).
  int64_t group = op.attr_int("group", 1), local_group = group == 1 ? 1 : x.local[1] / (x.full[1] / group);
  return "rt::ConvShape cs{" + num(x.local[0]) + ", " + num(x.local[1]) + ", " + num(w.local[0]) + ", " +
         num(local_group) + ", " + dims_literal(tail(x.local, 2)) + ", " + dims_literal(tail(w.local, 2)) + ", " +
         dims_literal(tail(y.local, 2)) + ", " + dims_literal(strides) + ", " + dims_literal(pads) + ", " +
         dims_literal(dil) + operands_arg(call, 0, 1) + "};\n";
}

/** The PoolShape of X (or dX) and Y (or dY) blocks; `dx`: MaxPoolGrad's output block, whose X is read whole-window.
 *  The block fields are only written when some spatial dim is split, so whole ops keep their code. */
std::string pool_shape(const Op &op, const Part &x, const Part &y, const Part *dx = nullptr) {
  size_t sp = x.local.size() - 2;
  std::vector<int64_t> kernel = op.attr_ints("kernel_shape");
  std::vector<int64_t> strides = op.attr_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = op.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> dil = op.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  std::string s = "rt::PoolShape ps{" + num(x.local[0] * x.local[1]) + ", " + dims_literal(tail(x.local, 2)) + ", " +
                  dims_literal(tail(y.local, 2)) + ", " + dims_literal(kernel) + ", " + dims_literal(strides) + ", " +
                  dims_literal(pads) + ", " + dims_literal(dil) + ", " +
                  (op.attr_int("count_include_pad", 0) ? "true" : "false");
  if (!spatial_whole(x) || !spatial_whole(y) || (dx && !spatial_whole(*dx))) {
    s += ", " + dims_literal(spatial_begins(x)) + ", " + dims_literal(spatial_begins(y)) + ", " +
         dims_literal(tail(x.full, 2));
    if (dx) s += ", " + dims_literal(spatial_begins(*dx)) + ", " + dims_literal(tail(dx->local, 2));
  }
  return s + "};\n";
}

/** ", divisor" with the whole op's spatial size when `p` holds a spatial block, else nothing. */
std::string global_divisor(const Part &p) { return spatial_whole(p) ? "" : ", " + num(prod(p.full, 2)); }

bool is_conv_kind(OpKind kind) {
  return kind == OpKind::Conv || kind == OpKind::ConvGradData || kind == OpKind::ConvGradFilter ||
         kind == OpKind::ConvTranspose;
}

/** X's, W's and Y's parts of a conv-family call. */
std::array<Part, 3> conv_parts(const KernelCall &call) {
  switch (call.node().kind) {
    case OpKind::Conv: return {in_part(call, 0), in_part(call, 1), out_part(call, 0)};
    case OpKind::ConvGradData:
    case OpKind::ConvTranspose:  // the data gradient of a Conv whose input is Y and whose output is X
      return {out_part(call, 0), in_part(call, 1), in_part(call, 0)};
    default: return {in_part(call, 1), out_part(call, 0), in_part(call, 0)};
  }
}

}  // namespace

bool is_window_kind(OpKind kind) {
  switch (kind) {
    case OpKind::Conv:
    case OpKind::ConvGradData:
    case OpKind::ConvGradFilter:
    case OpKind::ConvTranspose:
    case OpKind::MaxPool:
    case OpKind::MaxPoolGrad:
    case OpKind::AveragePool:
    case OpKind::AveragePoolGrad:
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalAveragePoolGrad:
      return true;
    default:
      return false;
  }
}

void check_window_split(const KernelCall &call) {
  // Batch, channel, spatial and kernel-tap splits all run on blocks (conv_shape, pool_shape); what is left out:
  const Op &op = call.node();
  if (is_conv_kind(op.kind) && op.attr_int("group", 1) != 1) {
    // With groups, a split of the channels within a group would interleave the groups' blocks; a split of the group
    // var g gives every operand whole groups.
    for (const char *var : {"co", "ci"})
      if (!call.axes_splitting(var).empty())
        CLEAVE_USER_ERROR("op \"", op.name, "\" (", op_kind_name(op.kind), "): splitting var ", var,
                          " of a convolution with ", op.attr_int("group", 1),
                          " groups is not supported by codegen yet (split g)");
    auto [x, w, y] = conv_parts(call);
    int64_t group = op.attr_int("group", 1), cg = x.full[1] / group, mg = w.full[0] / group;
    int64_t local = x.local[1] / cg;
    CLEAVE_CHECK(x.local[1] % cg == 0 && x.box[1].begin % cg == 0 && w.local[0] == local * mg &&
                     y.local[1] == local * mg && w.local[1] == cg,
                 "op ", op.name, ": group split boxes are not whole groups");
  }
  if (op.kind == OpKind::MaxPool && op.output(1) != kNoTensor)
    CLEAVE_USER_ERROR("op \"", op.name, "\" (MaxPool): the Indices output of a split MaxPool is not supported by ",
                      "codegen yet");
}

std::string window_kernel_code(const KernelCall &call) {
  const Op &op = call.node();
  const std::vector<std::string> &ins = call.ins, &outs = call.outs;
  const std::vector<Shape> &in_shapes = call.in_shapes, &out_shapes = call.out_shapes;
  auto in = [&](size_t i) -> const std::string & { return ins.at(i); };
  auto out = [&](size_t i) -> const std::string & { return outs.at(i); };
  auto has_out = [&](size_t i) { return i < outs.size() && !outs[i].empty(); };
  (void)has_out;
  switch (op.kind) {
    case OpKind::Conv: {
      auto [x, w, y] = conv_parts(call);
      return "{\n" + conv_shape(call, x, w, y) + "rt::conv_forward(cs, " + in(0) + ", " + in(1) + ", " +
             or_null(ins.size() > 2 ? ins[2] : "") + ", " + out(0) + ");\n}";
    }
    case OpKind::ConvGradData: {
      auto [x, w, y] = conv_parts(call);
      return "{\n" + conv_shape(call, x, w, y) + "rt::conv_backward_data(cs, " + in(0) + ", " + in(1) + ", " + out(0) +
             ");\n}";
    }
    case OpKind::ConvTranspose: {
      auto [x, w, y] = conv_parts(call);
      return "{\n" + conv_shape(call, x, w, y) + "rt::conv_transpose_forward(cs, " + in(0) + ", " + in(1) + ", " +
             or_null(ins.size() > 2 ? ins[2] : "") + ", " + out(0) + ");\n}";
    }
    case OpKind::ConvGradFilter: {
      auto [x, w, y] = conv_parts(call);
      return "{\n" + conv_shape(call, x, w, y) + "rt::conv_backward_filter(cs, " + in(0) + ", " + in(1) + ", " +
             out(0) + ");\n}";
    }
    case OpKind::MaxPool:
      return "{\n" + pool_shape(op, in_part(call, 0), out_part(call, 0)) + "rt::max_pool_forward(ps, " + in(0) +
             ", " + out(0) + ", " + (has_out(1) ? out(1) : "nullptr") + ");\n}";
    case OpKind::MaxPoolGrad: {
      Part dx = out_part(call, 0);
      return "{\n" + pool_shape(op, in_part(call, 1), in_part(call, 0), &dx) + "rt::max_pool_backward(ps, " + in(0) +
             ", " + in(1) + ", " + out(0) + ");\n}";
    }
    case OpKind::AveragePool:
      return "{\n" + pool_shape(op, in_part(call, 0), out_part(call, 0)) + "rt::avg_pool_forward(ps, " + in(0) +
             ", " + out(0) + ");\n}";
    case OpKind::AveragePoolGrad:
      return "{\n" + pool_shape(op, out_part(call, 0), in_part(call, 0)) + "rt::avg_pool_backward(ps, " + in(0) +
             ", " + out(0) + ");\n}";
    case OpKind::GlobalAveragePool:
      // A spatial block gives a partial sum over the whole op's divisor, all-reduced after the kernel.
      return "rt::global_avg_pool_forward(" + num(in_shapes[0][0] * in_shapes[0][1]) + ", " +
             num(prod(in_shapes[0], 2)) + ", " + in(0) + ", " + out(0) + global_divisor(in_part(call, 0)) + ");";
    case OpKind::GlobalAveragePoolGrad:
      return "rt::global_avg_pool_backward(" + num(out_shapes[0][0] * out_shapes[0][1]) + ", " +
             num(prod(out_shapes[0], 2)) + ", " + in(0) + ", " + out(0) + global_divisor(out_part(call, 0)) + ");";
    default:
      CLEAVE_CHECK(false, "not a kernel of this family: ", op_kind_name(op.kind));
  }
  return {};
}

}  // namespace cleave::codegen
