// ONNX ops that are exactly a composition of IR ops, lowered here rather than given kinds of their own: their
// gradients, descriptions, partitioning and kernels are those of the ops they lower to, so there is one place to
// get each right. ReduceSumSquare = ReduceSum(x*x), ReduceL2 = Sqrt of it, ReduceL1 = ReduceSum(Abs(x)), ReduceLogSum
// = Log(ReduceSum(x)), ReduceLogSumExp = m + Log(ReduceSum(Exp(x - m))) with m = ReduceMax(x) (stable for large x),
// LpNormalization = x / ReduceL2 (p 2) or x / ReduceL1 (p 1) along its axis, Tile = Reshape + Expand + Reshape
// (constant repeats), DepthToSpace / SpaceToDepth = Reshape + Transpose + Reshape (DCR and CRD modes), Einsum of one
// or two operands = ReduceSum of the letters only one operand has + Transpose + Reshape + MatMul (batch letters kept
// as MatMul's batch dims, contracted letters merged into K) + Reshape + Transpose.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <map>
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

namespace {

/** An operand of Einsum while it is lowered: its tensor name, one letter per dim, the dims' sizes. */
struct Labelled {
  std::string name;
  std::string letters;
  Shape shape;
};

/** Sums `x` over its letters that `keep` lacks. */
Labelled sum_letters_not_in(Chain &c, Labelled x, const std::string &keep, const std::string &hint) {
  std::vector<int64_t> axes;
  Labelled y{"", "", {}};
  for (size_t d = 0; d < x.letters.size(); ++d) {
    if (keep.find(x.letters[d]) == std::string::npos) {
      axes.push_back(static_cast<int64_t>(d));
    } else {
      y.letters += x.letters[d];
      y.shape.push_back(x.shape[d]);
    }
  }
  if (axes.empty()) return x;
  y.name = c.op(OpKind::ReduceSum, {x.name}, {{"axes", axes}, {"keepdims", int64_t{0}}}, hint);
  return y;
}

/** `x` with its dims in the order of `letters` (a permutation of x's), written to `out` if given. */
Labelled permute(Chain &c, Labelled x, const std::string &letters, const std::string &hint,
                 const std::string &out = "") {
  if (x.letters == letters && out.empty()) return x;
  std::vector<int64_t> perm;
  Shape shape;
  for (char l : letters) {
    auto d = static_cast<int64_t>(x.letters.find(l));
    perm.push_back(d);
    shape.push_back(x.shape[static_cast<size_t>(d)]);
  }
  std::string name = x.letters == letters ? c.op(OpKind::Identity, {x.name}, {}, hint, out)
                                          : c.op(OpKind::Transpose, {x.name}, {{"perm", perm}}, hint, out);
  return {name, letters, shape};
}

std::string letters_with(const std::string &from, const std::string &a, const std::string &b, bool in_a, bool in_b) {
  std::string r;
  for (char l : from)
    if ((a.find(l) != std::string::npos) == in_a && (b.find(l) != std::string::npos) == in_b) r += l;
  return r;
}

}  // namespace

void translate_einsum(Importer &im, const NodeCtx &n) {
  std::string eq;
  for (char ch : n.attrs.get_string("equation", "")) if (ch != ' ') eq += ch;
  if (eq.find("...") != std::string::npos) unsupported(n, "equation \"" + eq + "\" with an ellipsis is not supported");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {  // implicit output: the letters that occur once, in alphabetical (ASCII) order
    for (char l : lhs)
      if (std::isalpha(static_cast<unsigned char>(l)) && std::count(lhs.begin(), lhs.end(), l) == 1) out += l;
    std::sort(out.begin(), out.end());
  }
  std::vector<std::string> terms;
  for (size_t b = 0;;) {
    size_t e = lhs.find(',', b);
    terms.push_back(lhs.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != n.num_in() || terms.empty() || terms.size() > 2)
    unsupported(n, "equation \"" + eq + "\": only one or two operands, one term each, are supported");
  std::map<char, int64_t> size;
  std::vector<Labelled> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Shape shape = im.type_of(n.in(i), n).shape;
    const std::string &t = terms[i];
    if (t.size() != shape.size())
      n.fail("term \"" + t + "\" has " + std::to_string(t.size()) + " letters for input " + std::to_string(i) +
             " of rank " + std::to_string(shape.size()));
    for (size_t d = 0; d < t.size(); ++d) {
      if (!std::isalpha(static_cast<unsigned char>(t[d]))) n.fail("equation \"" + eq + "\" is malformed");
      if (t.find(t[d]) != d) unsupported(n, "term \"" + t + "\" repeats a letter (a diagonal): not supported");
      auto [it, fresh] = size.emplace(t[d], shape[d]);
      if (!fresh && it->second != shape[d])
        n.fail("letter '" + std::string(1, t[d]) + "' has sizes " + std::to_string(it->second) + " and " +
               std::to_string(shape[d]));
    }
    ops.push_back({n.in(i), t, shape});
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (out.find(out[d]) != d || !size.count(out[d]))
      n.fail("output \"" + out + "\" repeats a letter or has one no input has");
  }
  Chain c(im, n);
  if (ops.size() == 1) {
    permute(c, sum_letters_not_in(c, ops[0], out, "summed"), out, "", n.out(0));
    return;
  }
  Labelled a = sum_letters_not_in(c, ops[0], out + ops[1].letters, "a_summed");
  Labelled b = sum_letters_not_in(c, ops[1], out + a.letters, "b_summed");
  std::string batch = letters_with(out, a.letters, b.letters, true, true);
  std::string left = letters_with(out, a.letters, b.letters, true, false);
  std::string right = letters_with(out, a.letters, b.letters, false, true);
  std::string contracted = letters_with(a.letters, out, b.letters, false, true);
  auto prod_of = [&](const std::string &ls) {
    int64_t p = 1;
    for (char l : ls) p *= size[l];
    return p;
  };
  Shape bshape;
  for (char l : batch) bshape.push_back(size[l]);
  auto as_matrix = [&](Labelled x, const std::string &rows, const std::string &cols, const std::string &hint) {
    x = permute(c, x, batch + rows + cols, hint + "_moved");
    Shape m = bshape;
    m.push_back(prod_of(rows));
    m.push_back(prod_of(cols));
    return m == x.shape ? x.name : c.reshape(x.name, m, hint + "_matrix");
  };
  std::string am = as_matrix(a, left, contracted, "a");
  std::string bm = as_matrix(b, contracted, right, "b");
  Shape full = bshape;
  for (char l : left + right) full.push_back(size[l]);
  Shape mm = bshape;
  mm.push_back(prod_of(left));
  mm.push_back(prod_of(right));
  std::string natural = batch + left + right;
  bool last = natural == out && mm == full;
  std::string prod = c.op(OpKind::MatMul, {am, bm}, {}, "matmul", last ? n.out(0) : "");
  if (last) return;
  Labelled y{mm == full ? prod : c.reshape(prod, full, "unmerged", natural == out ? n.out(0) : ""), natural, full};
  if (natural != out) permute(c, y, out, "", n.out(0));
}

}  // namespace cleave
