// ONNX ops that are exactly a composition of IR ops, lowered here rather than given kinds of their own: their
// gradients, descriptions, partitioning and kernels are those of the ops they lower to, so there is one place to
// get each right. ReduceSumSquare = ReduceSum(x*x), ReduceL2 = Sqrt of it, ReduceL1 = ReduceSum(Abs(x)), ReduceLogSum
// = Log(ReduceSum(x)), ReduceLogSumExp = m + Log(ReduceSum(Exp(x - m))) with m = ReduceMax(x) (stable for large x),
// LpNormalization = x / ReduceL2 (p 2) or x / ReduceL1 (p 1) along its axis, Tile = Reshape + Expand + Reshape
// (constant repeats), DepthToSpace / SpaceToDepth = Reshape + Transpose + Reshape (DCR and CRD modes).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <numeric>

#include "frontend/importer.h"
#include "ir/error.h"

namespace cleave {
namespace {

[[noreturn]] void unsupported(const NodeCtx &n, const std::string &what) { throw UserError(n.label + ": " + what, 2); }

/** Emits a node as a chain of IR ops: the first op takes the node's name, the rest fresh names after it; every
 *  intermediate tensor is named after the node's output. */
class Chain {
 public:
  Chain(Importer &im, const NodeCtx &n) : im_(im), n_(n) {}

  /** One op of `kind` on `inputs`; writes `out` if given, else a fresh `<output>.<hint>`. Returns the output's name. */
  std::string op(OpKind kind, std::vector<std::string> inputs, AttrMap attrs, const std::string &hint,
                 const std::string &out = "") {
    OpSpec s;
    s.kind = kind;
    s.phase = n_.phase;
    s.inputs = std::move(inputs);
    s.outputs = {out.empty() ? im_.fresh_tensor_name(n_.out(0) + "." + hint) : out};
    s.attrs = std::move(attrs);
    im_.emit(s, first_ ? n_.name : im_.fresh_op_name(n_.name), n_);
    first_ = false;
    return s.outputs[0];
  }
  std::string reshape(const std::string &x, const Shape &shape, const std::string &hint, const std::string &out = "") {
    return op(OpKind::Reshape, {x}, {{"shape", shape}}, hint, out);
  }

 private:
  Importer &im_;
  const NodeCtx &n_;
  bool first_ = true;
};

/** The reduce ops' axes attribute (opsets 13-17; ReduceSum's input is not read here): sorted, non-negative; empty or
 *  absent = every axis. */
std::vector<int64_t> reduce_axes(const NodeCtx &n, int64_t rank) {
  std::vector<int64_t> axes = n.attrs.opt_ints("axes").value_or(std::vector<int64_t>{});
  if (axes.empty()) {
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t &a : axes) a = norm_axis(n, a, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) n.fail("axes repeat an axis");
  return axes;
}

Shape reduced_shape(const Shape &x, const std::vector<int64_t> &axes, bool keep) {
  Shape y;
  for (size_t d = 0; d < x.size(); ++d) {
    bool r = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d));
    if (!r) y.push_back(x[d]);
    else if (keep) y.push_back(1);
  }
  return y;
}

}  // namespace

void translate_reduce_composite(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (n.attrs.get_int("noop_with_empty_axes", 0) != 0 && n.attrs.opt_ints("axes").value_or(std::vector<int64_t>{}).empty())
    unsupported(n, "noop_with_empty_axes 1 is not supported");
  std::vector<int64_t> axes = reduce_axes(n, static_cast<int64_t>(x.size()));
  bool keep = n.attrs.get_int("keepdims", 1) != 0;
  Chain c(im, n);
  const std::string &in = n.in(0), &out = n.out(0);
  auto sum = [&](const std::string &v, bool keepdims, const std::string &hint, const std::string &to = "") {
    return c.op(OpKind::ReduceSum, {v}, {{"axes", axes}, {"keepdims", int64_t{keepdims}}}, hint, to);
  };
  if (n.op_type == "ReduceSumSquare" || n.op_type == "ReduceL2") {
    std::string sq = c.op(OpKind::Mul, {in, in}, {}, "square");
    if (n.op_type == "ReduceSumSquare") {
      sum(sq, keep, "", out);
      return;
    }
    c.op(OpKind::Sqrt, {sum(sq, keep, "sum_square")}, {}, "", out);
  } else if (n.op_type == "ReduceL1") {
    sum(c.op(OpKind::Abs, {in}, {}, "abs"), keep, "", out);
  } else if (n.op_type == "ReduceLogSum") {
    c.op(OpKind::Log, {sum(in, keep, "sum")}, {}, "", out);
  } else {  // ReduceLogSumExp
    // Shifting by the maximum keeps Exp finite; the gradient through m cancels (up to rounding: the two paths sum
    // dY * (1 - S'/S) at the maximum, S' the backward's recomputation of the same sum).
    std::string m = c.op(OpKind::ReduceMax, {in}, {{"axes", axes}, {"keepdims", int64_t{1}}}, "max");
    std::string e = c.op(OpKind::Exp, {c.op(OpKind::Sub, {in, m}, {}, "shifted")}, {}, "exp");
    std::string lse = c.op(OpKind::Add, {c.op(OpKind::Log, {sum(e, true, "sum_exp")}, {}, "log_sum_exp"), m}, {},
                           keep ? "" : "keepdims", keep ? out : "");
    if (!keep) c.reshape(lse, reduced_shape(x, axes, false), "", out);
  }
}

void translate_lp_normalization(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  int64_t axis = norm_axis(n, n.attrs.get_int("axis", -1), static_cast<int64_t>(x.size()));
  int64_t p = n.attrs.get_int("p", 2);
  if (p != 1 && p != 2) unsupported(n, "p " + std::to_string(p) + " is not supported (only 1 and 2)");
  // ONNX's reference divides by the norm as it is (no epsilon): a zero row gives NaN, as there.
  Chain c(im, n);
  const std::string &in = n.in(0);
  AttrMap sum_attrs{{"axes", std::vector<int64_t>{axis}}, {"keepdims", int64_t{1}}};
  std::string norm = p == 1 ? c.op(OpKind::ReduceSum, {c.op(OpKind::Abs, {in}, {}, "abs")}, sum_attrs, "l1")
                            : c.op(OpKind::Sqrt, {c.op(OpKind::ReduceSum, {c.op(OpKind::Mul, {in, in}, {}, "square")},
                                                        sum_attrs, "sum_square")},
                                   {}, "l2");
  c.op(OpKind::Div, {in, norm}, {}, "", n.out(0));
}

void translate_tile(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  std::vector<int64_t> repeats = const_ints(im, n, 1, "\"repeats\"");
  if (repeats.size() != x.size())
    n.fail("repeats " + shape_str(repeats) + " has " + std::to_string(repeats.size()) + " entries for input rank " +
           std::to_string(x.size()));
  // Y[k * d + i] = X[i] along each dim: view X as [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...], merge pairs.
  // Dims repeated once get no extra axis.
  Shape split, expanded, out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (repeats[d] < 0) n.fail("repeats " + shape_str(repeats) + " has a negative entry");
    if (repeats[d] != 1) {
      split.push_back(1);
      expanded.push_back(repeats[d]);
    }
    split.push_back(x[d]);
    expanded.push_back(x[d]);
    out.push_back(x[d] * repeats[d]);
  }
  Chain c(im, n);
  if (split == x) {
    c.op(OpKind::Identity, {n.in(0)}, {}, "", n.out(0));
    return;
  }
  std::string v = c.reshape(n.in(0), split, "split");
  std::string e = c.op(OpKind::Expand, {v}, {{"shape", expanded}}, "expanded");
  c.reshape(e, out, "", n.out(0));
}

void translate_depth_space(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (x.size() != 4) n.fail("input has rank " + std::to_string(x.size()) + "; " + n.op_type + " needs [N, C, H, W]");
  int64_t b = n.attrs.req_int("blocksize");
  if (b < 1) n.fail("blocksize " + std::to_string(b) + " must be positive");
  int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  Shape mid, out;
  std::vector<int64_t> perm;
  if (n.op_type == "DepthToSpace") {
    if (C % (b * b) != 0) n.fail("channels " + std::to_string(C) + " are not a multiple of blocksize^2");
    std::string mode = n.attrs.get_string("mode", "DCR");
    // DCR: the channel index is (by, bx, c); CRD: (c, by, bx). Both end as [N, c, H*b, W*b].
    if (mode == "DCR") {
      mid = {N, b, b, C / (b * b), H, W};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      mid = {N, C / (b * b), b, b, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      unsupported(n, "mode \"" + mode + "\" is not supported (DCR, CRD)");
    }
    out = {N, C / (b * b), H * b, W * b};
  } else {  // SpaceToDepth: the inverse of DepthToSpace in DCR mode
    if (H % b != 0 || W % b != 0)
      n.fail("spatial dims " + shape_str({H, W}) + " are not multiples of blocksize " + std::to_string(b));
    mid = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {N, C * b * b, H / b, W / b};
  }
  Chain c(im, n);
  std::string v = c.reshape(n.in(0), mid, "blocks");
  std::string t = c.op(OpKind::Transpose, {v}, {{"perm", perm}}, "moved");
  c.reshape(t, out, "", n.out(0));
}

}  // namespace cleave
