// ONNX ops that are exactly a composition of IR ops, lowered here rather than given kinds of their own: their
// gradients, descriptions, partitioning and kernels are those of the ops they lower to, so there is one place to
// get each right. ReduceSumSquare = ReduceSum(x*x), ReduceL2 = Sqrt of it, ReduceL1 = ReduceSum(Abs(x)), ReduceLogSum
// = Log(ReduceSum(x)), ReduceLogSumExp = m + Log(ReduceSum(Exp(x - m))) with m = ReduceMax(x) (stable for large x),
// LpNormalization = x / ReduceL2 (p 2) or x / ReduceL1 (p 1) along its axis, Tile = Reshape + Expand + Reshape
// (constant repeats), DepthToSpace / SpaceToDepth = Reshape + Transpose + Reshape (DCR and CRD modes), Einsum =
// pairwise contractions, each Transpose + Reshape + batched MatMul + Reshape (ReduceSum for a label only one side has),
// ReduceProd of run-time values = per reduced axis, halving products (Mul of its two halves, Slices, until length 1),
// LRN = X / (bias + alpha * AveragePool of X^2 along the channels)^beta, GlobalMaxPool = ReduceMax over the spatial
// dims, IsNaN = Not(Equal(x, x)), IsInf = Equal with +-inf, Shrink = two Wheres, Hardmax = OneHot(ArgMax) along its
// axis, GridSample (2-D; bilinear, nearest and bicubic; zeros, border and reflection padding) = per output pixel a
// weight over every input pixel and a batched MatMul; MaxUnpool = ScatterElements of X into zeros at I (flat over
// the whole output, as onnxruntime and torch); Det = the Leibniz sum over permutations (up to 4x4); EyeLike folds to
// a constant (its values do not depend on the input's).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "frontend/importer.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/tensor_data.h"

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
  /** x[begin:end] along `axis`, unit steps. */
  std::string slice(const std::string &x, int64_t axis, int64_t begin, int64_t end, const std::string &hint) {
    return op(OpKind::Slice, {x},
              {{"starts", std::vector<int64_t>{begin}}, {"ends", std::vector<int64_t>{end}},
               {"axes", std::vector<int64_t>{axis}}, {"steps", std::vector<int64_t>{1}}},
              hint);
  }
  /** A constant of `dtype` and `shape` holding `values` (one per element), named after the node's output. */
  std::string constant(DType dtype, const Shape &shape, const std::vector<double> &values, const std::string &hint) {
    Tensor t;
    t.name = im_.fresh_tensor_name(n_.out(0) + "." + hint);
    t.dtype = dtype;
    t.shape = shape;
    t.role = Role::constant;
    t.data = encode_doubles(dtype, values);
    std::string name = t.name;
    im_.define_const(std::move(t));
    return name;
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

void lower_reduce_prod(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> axes = reduce_axes(n, rank);  // opsets 13-17: no noop_with_empty_axes
  bool keep = n.attrs.get_int("keepdims", 1) != 0;
  // Mul's gradient rule makes each element's gradient the product of the others, exact where some are zero (a
  // division of the product by the element would not be). log2(length) Muls per axis, each partitionable.
  Chain c(im, n);
  std::string v = n.in(0);
  Shape s = x;
  for (int64_t a : axes) {
    auto &len = s[static_cast<size_t>(a)];
    if (len == 0) unsupported(n, "a product over the empty axis " + std::to_string(a) + " is not supported");
    while (len > 1) {
      int64_t half = len / 2;
      std::string prod = c.op(OpKind::Mul, {c.slice(v, a, 0, half, "slice"), c.slice(v, a, half, 2 * half, "slice")}, {},
                              "prod");
      if (len % 2 != 0) prod = c.op(OpKind::Concat, {prod, c.slice(v, a, 2 * half, len, "slice")}, {{"axis", a}}, "prod");
      v = prod;
      len -= half;
    }
  }
  c.reshape(v, reduced_shape(x, axes, keep), "", n.out(0));
}

void translate_global_max_pool(Importer &im, const NodeCtx &n) {
  Shape x = im.type_of(n.in(0), n).shape;
  if (x.size() < 3) n.fail("input has rank " + std::to_string(x.size()) + "; GlobalMaxPool needs (N, C, spatial...)");
  std::vector<int64_t> axes;
  for (size_t d = 2; d < x.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  Chain(im, n).op(OpKind::ReduceMax, {n.in(0)}, {{"axes", axes}, {"keepdims", int64_t{1}}}, "", n.out(0));
}

/** The dtype of tensor `name`, the node's input `what`, when it is a float type, else the node's error naming it. */
DType float_input(Importer &im, const NodeCtx &n, const std::string &name, const char *what) {
  DType t = im.type_of(name, n).dtype;
  if (!is_float(t)) n.fail(std::string("input ") + what + " is " + std::string(dtype_name(t)) + "; only float types are supported");
  return t;
}
DType float_input(Importer &im, const NodeCtx &n, size_t i, const char *what) {
  return float_input(im, n, n.in(i), what);
}

void translate_isnan_isinf(Importer &im, const NodeCtx &n) {
  auto widened = im.widened.find(n.in(0));  // the input of a widening Cast, tested as it is
  const std::string &x = widened == im.widened.end() ? n.in(0) : widened->second, &y = n.out(0);
  DType t = float_input(im, n, x, "X");
  Chain c(im, n);
  if (n.op_type == "IsNaN") {
    c.op(OpKind::Not, {c.op(OpKind::Equal, {x, x}, {}, "equal")}, {}, "", y);
    return;
  }
  bool neg = n.attrs.get_int("detect_negative", 1) != 0, pos = n.attrs.get_int("detect_positive", 1) != 0;
  double inf = std::numeric_limits<double>::infinity();
  auto is = [&](double v, const std::string &hint, const std::string &out = "") {
    return c.op(OpKind::Equal, {x, c.constant(t, {}, {v}, hint)}, {}, hint + "_equal", out);
  };
  if (neg && pos) c.op(OpKind::Or, {is(inf, "inf"), is(-inf, "minus_inf")}, {}, "", y);
  else if (neg || pos) is(neg ? -inf : inf, neg ? "minus_inf" : "inf", y);
  else c.op(OpKind::Less, {x, c.constant(t, {}, {-inf}, "minus_inf")}, {}, "", y);  // false everywhere
}

void translate_shrink(Importer &im, const NodeCtx &n) {
  DType t = float_input(im, n, 0, "input");
  double lambd = n.attrs.get_float("lambd", 0.5), bias = n.attrs.get_float("bias", 0.0);
  // y = x + bias where x < -lambd, x - bias where x > lambd, else 0.
  Chain c(im, n);
  const std::string &x = n.in(0);
  auto k = [&](double v, const std::string &hint) { return c.constant(t, {}, {v}, hint); };
  std::string above = c.op(OpKind::Where, {c.op(OpKind::Greater, {x, k(lambd, "lambd")}, {}, "above"),
                                           c.op(OpKind::Sub, {x, k(bias, "bias")}, {}, "minus_bias"), k(0, "zero")},
                           {}, "upper");
  c.op(OpKind::Where, {c.op(OpKind::Less, {x, k(-lambd, "minus_lambd")}, {}, "below"),
                       c.op(OpKind::Add, {x, k(bias, "bias")}, {}, "plus_bias"), above},
       {}, "", n.out(0));
}

void translate_hardmax(Importer &im, const NodeCtx &n) {
  DType t = float_input(im, n, 0, "input");
  Shape x = im.type_of(n.in(0), n).shape;
  auto rank = static_cast<int64_t>(x.size());
  int64_t axis = norm_axis(n, n.attrs.get_int("axis", -1), rank);
  // The first maximum along the axis is 1, as ArgMax picks it.
  Chain c(im, n);
  std::string idx = c.op(OpKind::ArgMax, {n.in(0)},
                         {{"axis", axis}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{0}}}, "argmax");
  c.op(OpKind::OneHot, {idx, c.constant(t, {2}, {0, 1}, "values")},
       {{"axis", axis}, {"depth", x[static_cast<size_t>(axis)]}}, "", n.out(0));
}

/** torch's reflect_coordinates: i mirrored at twice_low / 2 and twice_high / 2 (pixel centres with align_corners,
 *  else the outer edges) until it lies between them. With d = |i - low| and span = high - low, the position in the
 *  current span is fmod(d, span), counted from low on even passes and from high on odd ones. */
std::string reflect(Chain &c, const std::string &i, const Shape &shape, int64_t twice_low, int64_t twice_high, DType t,
                    const std::string &axis) {
  auto k = [&](double v, const std::string &hint) { return c.constant(t, {}, {v}, axis + hint); };
  if (twice_low == twice_high)  // one pixel, align_corners: every coordinate is its centre, even an infinite one
    return c.constant(t, shape, std::vector<double>(static_cast<size_t>(num_elements(shape)), 0.0), axis + "_reflected");
  std::string low = k(static_cast<double>(twice_low) / 2, "_low"),
              span = k(static_cast<double>(twice_high - twice_low) / 2, "_span");
  std::string d = c.op(OpKind::Abs, {c.op(OpKind::Sub, {i, low}, {}, axis + "_from_low")}, {}, axis + "_dist");
  std::string extra = c.op(OpKind::Mod, {d, span}, {{"fmod", int64_t{1}}}, axis + "_extra");
  std::string flips = c.op(OpKind::Floor, {c.op(OpKind::Div, {d, span}, {}, axis + "_spans")}, {}, axis + "_flips");
  std::string even = c.op(OpKind::Equal, {c.op(OpKind::Mod, {flips, k(2, "_two")}, {{"fmod", int64_t{1}}}, axis + "_parity"),
                                          k(0, "_zero")},
                          {}, axis + "_even");
  return c.op(OpKind::Where, {even, c.op(OpKind::Add, {extra, low}, {}, axis + "_forward"),
                              c.op(OpKind::Add, {c.op(OpKind::Sub, {span, extra}, {}, axis + "_back"), low}, {},
                                   axis + "_backward")},
              {}, axis + "_reflected");
}

void translate_grid_sample(Importer &im, const NodeCtx &n) {
  DType t = float_input(im, n, 0, "X");
  Shape x = im.type_of(n.in(0), n).shape, grid = im.type_of(n.in(1), n).shape;
  if (x.size() != 4) unsupported(n, "input X has rank " + std::to_string(x.size()) + "; only 2-D sampling (rank 4) is supported");
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
    n.fail("grid " + shape_str(grid) + " must be [N, H_out, W_out, 2] with N = " + std::to_string(x[0]));
  std::string mode = n.attrs.get_string("mode", "bilinear"), padding = n.attrs.get_string("padding_mode", "zeros");
  bool align = n.attrs.get_int("align_corners", 0) != 0;
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    unsupported(n, "mode \"" + mode + "\" is not supported (bilinear, nearest, bicubic)");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    unsupported(n, "padding_mode \"" + padding + "\" is not supported (zeros, border, reflection)");
  int64_t batch = x[0], channels = x[1], h = x[2], w = x[3], outs = grid[1] * grid[2];
  // Y[n, c, o] = sum over input pixels p of X[n, c, p] * weight[n, o, p], weight = wy[n, o, py] * wx[n, o, px]. Along
  // each axis the source coordinate i (torch's unnormalised grid value; clipped for border, reflected then clipped for
  // reflection) gives the pixel floor(i) the weight 1 - (i - floor(i)) and the next one i - floor(i), as torch's
  // bilinear kernel does, so the gradient with respect to the grid is torch's; nearest gives the pixel round(i)
  // (halves to even, as torch's nearbyint) the weight 1 and the grid no gradient. Pixels outside the input match
  // nothing: zero padding. bicubic gives the pixels floor(i) - 1 to floor(i) + 2 torch's cubic convolution weights
  // (A = -0.75) of t = i - floor(i), padding each of those four pixels' coordinates rather than i, as torch's kernel
  // does; pixels that land on one (border) add up.
  Chain c(im, n);
  std::string g = c.reshape(n.in(1), {batch, outs, 2}, "grid");
  auto weights = [&](int64_t component, int64_t size, const std::string &axis) {
    std::string coord = c.slice(g, 2, component, component + 1, axis);
    // align_corners: -1 and 1 are the centres of the edge pixels, else their outer edges. In torch's order of
    // operations, ((g + 1) / 2) * (size - 1) and ((g + 1) * size - 1) / 2, so a source coordinate on a half rounds
    // (nearest) as torch's does.
    auto k = [&](double v, const std::string &hint) { return c.constant(t, {}, {v}, axis + hint); };
    std::string g1 = c.op(OpKind::Add, {coord, k(1, "_one")}, {}, axis + "_plus_one");
    std::string i =
        align ? c.op(OpKind::Mul, {c.op(OpKind::Mul, {g1, k(0.5, "_half")}, {}, axis + "_unit"),
                                   k(static_cast<double>(size - 1), "_extent")},
                     {}, axis + "_source")
              : c.op(OpKind::Mul, {c.op(OpKind::Sub, {c.op(OpKind::Mul, {g1, k(static_cast<double>(size), "_size")}, {},
                                                           axis + "_scaled"),
                                                      k(1, "_one_")},
                                        {}, axis + "_shifted"),
                                   k(0.5, "_half")},
                     {}, axis + "_source");
    auto padded = [&](std::string at, const std::string &name) {
      if (padding == "reflection")
        at = reflect(c, at, {batch, outs, 1}, align ? 0 : -1, align ? 2 * (size - 1) : 2 * size - 1, t, name);
      if (padding != "zeros")
        at = c.op(OpKind::Clip, {at}, {{"min", 0.0}, {"max", static_cast<double>(size - 1)}}, name + "_clipped");
      return at;
    };
    std::vector<double> idx(static_cast<size_t>(size));
    std::iota(idx.begin(), idx.end(), 0.0);
    std::string pixels = c.constant(t, {1, 1, size}, idx, axis + "_pixels");
    std::string zero = c.constant(t, {}, {0}, axis + "_zero");
    if (mode == "bicubic") {
      std::string lo = c.op(OpKind::Floor, {i}, {}, axis + "_floor");
      std::string frac = c.op(OpKind::Sub, {i, lo}, {}, axis + "_frac");
      // torch's cubic_convolution1 (|x| <= 1) and cubic_convolution2 (1 < |x| < 2), in its order of operations.
      const double a = -0.75;
      std::string one = k(1, "_one");
      auto near = [&](const std::string &d, const std::string &hint) {
        std::string inner =
            c.op(OpKind::Sub, {c.op(OpKind::Mul, {d, k(a + 2, "_a2")}, {}, hint + "_1"), k(a + 3, "_a3")}, {},
                 hint + "_2");
        std::string cube = c.op(OpKind::Mul, {c.op(OpKind::Mul, {inner, d}, {}, hint + "_3"), d}, {}, hint + "_4");
        return c.op(OpKind::Add, {cube, one}, {}, hint);
      };
      auto far = [&](const std::string &d, const std::string &hint) {
        std::string p = c.op(OpKind::Sub, {c.op(OpKind::Mul, {d, k(a, "_a")}, {}, hint + "_1"), k(5 * a, "_5a")}, {},
                             hint + "_2");
        p = c.op(OpKind::Add, {c.op(OpKind::Mul, {p, d}, {}, hint + "_3"), k(8 * a, "_8a")}, {}, hint + "_4");
        return c.op(OpKind::Sub, {c.op(OpKind::Mul, {p, d}, {}, hint + "_5"), k(4 * a, "_4a")}, {}, hint);
      };
      std::string one_minus = c.op(OpKind::Sub, {one, frac}, {}, axis + "_one_minus");
      std::vector<std::string> coeffs = {far(c.op(OpKind::Add, {frac, one}, {}, axis + "_d0"), axis + "_coeff0"),
                                         near(frac, axis + "_coeff1"), near(one_minus, axis + "_coeff2"),
                                         far(c.op(OpKind::Add, {one_minus, one}, {}, axis + "_d3"), axis + "_coeff3")};
      std::string weight;
      for (int tap = 0; tap < 4; ++tap) {
        std::string name = axis + "_tap" + std::to_string(tap);
        std::string at =
            padded(c.op(OpKind::Add, {lo, k(tap - 1, "_offset" + std::to_string(tap))}, {}, name), name);
        std::string w_tap = c.op(OpKind::Where, {c.op(OpKind::Equal, {pixels, at}, {}, name + "_hit"),
                                                 coeffs[static_cast<size_t>(tap)], zero},
                                 {}, name + "_weight");
        weight = weight.empty() ? w_tap : c.op(OpKind::Add, {weight, w_tap}, {}, name + "_sum");
      }
      return weight;
    }
    i = padded(i, axis);
    if (mode == "nearest") {
      std::string hit = c.op(OpKind::Equal, {pixels, c.op(OpKind::Round, {i}, {}, axis + "_nearest")}, {}, axis + "_hit");
      return c.op(OpKind::Where, {hit, c.constant(t, {}, {1}, axis + "_one"), zero}, {}, axis + "_weight");
    }
    std::string lo = c.op(OpKind::Floor, {i}, {}, axis + "_floor");
    std::string frac = c.op(OpKind::Sub, {i, lo}, {}, axis + "_frac");
    std::string hi = c.op(OpKind::Add, {lo, c.constant(t, {}, {1}, axis + "_one")}, {}, axis + "_next");
    std::string w_lo = c.op(OpKind::Where, {c.op(OpKind::Equal, {pixels, lo}, {}, axis + "_at_floor"),
                                            c.op(OpKind::Sub, {c.constant(t, {}, {1}, axis + "_one_"), frac}, {},
                                                 axis + "_rest"),
                                            zero},
                            {}, axis + "_weight_floor");
    std::string w_hi = c.op(OpKind::Where, {c.op(OpKind::Equal, {pixels, hi}, {}, axis + "_at_next"), frac, zero}, {},
                            axis + "_weight_next");
    return c.op(OpKind::Add, {w_lo, w_hi}, {}, axis + "_weight");
  };
  std::string wx = weights(0, w, "x"), wy = weights(1, h, "y");  // [N, outs, W], [N, outs, H]
  std::string weight = c.op(OpKind::Mul, {c.reshape(wy, {batch, outs, h, 1}, "wy"), c.reshape(wx, {batch, outs, 1, w}, "wx")},
                            {}, "weight");
  std::string weight_t = c.op(OpKind::Transpose, {c.reshape(weight, {batch, outs, h * w}, "weight_rows")},
                              {{"perm", std::vector<int64_t>{0, 2, 1}}}, "weight_t");
  std::string y = c.op(OpKind::MatMul, {c.reshape(n.in(0), {batch, channels, h * w}, "x_rows"), weight_t}, {}, "rows");
  c.reshape(y, {batch, channels, grid[1], grid[2]}, "", n.out(0));
}

void translate_lrn(Importer &im, const NodeCtx &n) {
  DType t = float_input(im, n, 0, "X");
  Shape x = im.type_of(n.in(0), n).shape;
  if (x.size() < 2) n.fail("input X has rank " + std::to_string(x.size()) + "; LRN needs [N, C, ...]");
  std::optional<int64_t> size = n.attrs.opt_int("size");
  if (!size || *size < 1) n.fail("attribute \"size\" must be given and positive");
  double alpha = n.attrs.get_float("alpha", 1e-4), beta = n.attrs.get_float("beta", 0.75),
         bias = n.attrs.get_float("bias", 1.0);
  // Y = X / (bias + alpha / size * S)^beta, S[n, c] = the sum of X^2 over channels c - floor((size - 1) / 2) to
  // c + ceil((size - 1) / 2) within [0, C): alpha / size * S = alpha * the zero-padded average over that window, an
  // AveragePool along the channels of X^2 seen as [N, 1, C, rest].
  int64_t rest = 1;
  for (size_t d = 2; d < x.size(); ++d) rest *= x[d];
  Chain c(im, n);
  const std::string &in = n.in(0);
  auto k = [&](double v, const std::string &hint) { return c.constant(t, {}, {v}, hint); };
  std::string squares = c.reshape(c.op(OpKind::Mul, {in, in}, {}, "square"), {x[0], 1, x[1], rest}, "square_rows");
  AttrMap pool{{"kernel_shape", std::vector<int64_t>{*size, 1}},
               {"pads", std::vector<int64_t>{(*size - 1) / 2, 0, *size / 2, 0}},
               {"count_include_pad", int64_t{1}}};
  std::string mean = c.reshape(c.op(OpKind::AveragePool, {squares}, pool, "window_mean"), x, "window");
  std::string scale = c.op(OpKind::Add, {k(bias, "bias"), c.op(OpKind::Mul, {mean, k(alpha, "alpha")}, {}, "scaled")},
                           {}, "scale");
  c.op(OpKind::Div, {in, c.op(OpKind::Pow, {scale, k(beta, "beta")}, {}, "scale_pow")}, {}, "", n.out(0));
}

void translate_max_unpool(Importer &im, const NodeCtx &n) {
  DType t = float_input(im, n, 0, "X");
  Shape x = im.type_of(n.in(0), n).shape, idx = im.type_of(n.in(1), n).shape;
  std::vector<int64_t> kernel = n.attrs.opt_ints("kernel_shape").value_or(std::vector<int64_t>{});
  size_t r = kernel.size();
  if (r == 0 || x.size() != r + 2)
    n.fail("input X has rank " + std::to_string(x.size()) + "; kernel_shape " + shape_str(kernel) + " needs rank " +
           std::to_string(r + 2));
  if (idx != x) n.fail("indices I " + shape_str(idx) + " must have X's shape " + shape_str(x));
  std::vector<int64_t> strides = n.attrs.opt_ints("strides").value_or(std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = n.attrs.opt_ints("pads").value_or(std::vector<int64_t>(2 * r, 0));
  if (strides.size() != r || pads.size() != 2 * r)
    n.fail("attributes \"strides\" and \"pads\" need " + std::to_string(r) + " and " + std::to_string(2 * r) +
           " entries");
  // X's values land at I, flat indices into the output: by default the shape of the MaxPool input this unpools (its
  // pads taken off), or output_shape, for a MaxPool input whose size the window did not divide (onnxruntime and torch's
  // max_unpool; ONNX's Python reference instead scatters into the default shape and pads it with zeros).
  Shape out = {x[0], x[1]};
  for (size_t d = 0; d < r; ++d) out.push_back((x[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]);
  Shape inferred = out;
  if (!n.in(2).empty()) {
    out = const_ints(im, n, 2, "\"output_shape\"");
    bool fits = out.size() == x.size();
    for (size_t d = 0; fits && d < out.size(); ++d) fits = d < 2 ? out[d] == inferred[d] : out[d] >= inferred[d];
    if (!fits)
      n.fail("output_shape " + shape_str(out) + " must be [N, C, spatial...] no smaller than " + shape_str(inferred));
  }
  for (int64_t d : out)
    if (d < 1) n.fail("the unpooled shape " + shape_str(out) + " must be positive");
  int64_t total = checked_num_elements(out, n.label), m = num_elements(x);
  Chain c(im, n);
  std::string zeros = c.constant(t, {1, total}, std::vector<double>(static_cast<size_t>(total), 0.0), "zeros");
  std::string y = c.op(OpKind::ScatterElements,
                       {zeros, c.reshape(n.in(1), {1, m}, "indices"), c.reshape(n.in(0), {1, m}, "values")},
                       {{"axis", int64_t{1}}, {"reduction", std::string("none")}}, "scattered");
  c.reshape(y, out, "", n.out(0));
}

void translate_det(Importer &im, const NodeCtx &n) {
  float_input(im, n, 0, "X");
  Shape x = im.type_of(n.in(0), n).shape;
  size_t rank = x.size();
  if (rank < 2 || x[rank - 1] != x[rank - 2]) n.fail("input X " + shape_str(x) + " must be [..., n, n]");
  int64_t size = x[rank - 1];
  if (size < 1) n.fail("input X " + shape_str(x) + " has empty matrices");
  if (size > 4)
    unsupported(n, "matrices of " + std::to_string(size) + "x" + std::to_string(size) +
                       " are not supported (up to 4x4)");
  // det = sum over the permutations p of sign(p) * prod_i X[..., i, p(i)]: at most 24 products of 4 elements, each
  // element a Slice, so the gradient (the cofactors) comes from the ops' own rules and a batch of matrices splits.
  Shape batch(x.begin(), x.end() - 2);
  Chain c(im, n);
  std::map<std::pair<int64_t, int64_t>, std::string> element;
  auto at = [&](int64_t i, int64_t j) {
    auto [it, fresh] = element.try_emplace({i, j});
    if (fresh) {
      std::string row = c.slice(n.in(0), static_cast<int64_t>(rank) - 2, i, i + 1, "row" + std::to_string(i));
      it->second = c.slice(row, static_cast<int64_t>(rank) - 1, j, j + 1,
                           "x" + std::to_string(i) + std::to_string(j));
    }
    return it->second;
  };
  std::vector<int64_t> p(static_cast<size_t>(size));
  std::iota(p.begin(), p.end(), 0);
  std::string sum;
  do {
    int inversions = 0;
    for (size_t a = 0; a < p.size(); ++a)
      for (size_t b = a + 1; b < p.size(); ++b) inversions += p[a] > p[b];
    std::string term = at(0, p[0]);
    for (int64_t i = 1; i < size; ++i)
      term = c.op(OpKind::Mul, {term, at(i, p[static_cast<size_t>(i)])}, {}, "product");
    if (sum.empty())
      sum = inversions % 2 ? c.op(OpKind::Neg, {term}, {}, "term") : term;
    else
      sum = c.op(inversions % 2 ? OpKind::Sub : OpKind::Add, {sum, term}, {}, "sum");
  } while (std::next_permutation(p.begin(), p.end()));
  c.reshape(sum, batch, "", n.out(0));
}

void translate_eye_like(Importer &im, const NodeCtx &n) {
  const TensorType in = im.type_of(n.in(0), n);
  if (in.shape.size() != 2) n.fail("input has rank " + std::to_string(in.shape.size()) + "; EyeLike needs rank 2");
  DType t = in.dtype;
  if (std::optional<int64_t> dt = n.attrs.opt_int("dtype")) {
    std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(*dt));
    if (!d) n.fail("attribute \"dtype\" " + onnx_dtype_name(static_cast<int32_t>(*dt)) + " is not supported");
    t = *d;
  }
  int64_t k = n.attrs.get_int("k", 0), rows = in.shape[0], cols = in.shape[1];
  std::vector<double> v(static_cast<size_t>(rows * cols), 0.0);
  if (k > -rows && k < cols)  // else no diagonal element lies inside (and r + k could overflow)
    for (int64_t r = 0; r < rows; ++r)
      if (r + k >= 0 && r + k < cols) v[static_cast<size_t>(r * cols + r + k)] = 1.0;
  Tensor y;
  y.name = n.out(0);
  y.dtype = t;
  y.shape = in.shape;
  y.role = Role::constant;
  y.data = encode_doubles(t, v);
  if (im.defined(y.name)) n.fail("output \"" + y.name + "\" is already defined");
  im.define_const(std::move(y));
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

/** An operand of an Einsum: its tensor name and one label per dim. */
struct Labelled {
  std::string name;
  std::string labels;
  Shape shape;
};

/** The permutation that puts x's labels in the order `want` (a permutation of them). */
std::vector<int64_t> perm_to(const std::string &have, const std::string &want) {
  std::vector<int64_t> perm;
  for (char l : want) perm.push_back(static_cast<int64_t>(have.find(l)));
  return perm;
}

class EinsumLowering {
 public:
  EinsumLowering(Importer &im, const NodeCtx &n) : n_(n), c_(im, n) {}

  /** x with its labels in the order `want` (no op when they already are). */
  Labelled transpose(const Labelled &x, const std::string &want, const std::string &hint) {
    if (x.labels == want) return x;
    std::vector<int64_t> perm = perm_to(x.labels, want);
    Shape shape;
    for (int64_t p : perm) shape.push_back(x.shape[static_cast<size_t>(p)]);
    return {c_.op(OpKind::Transpose, {x.name}, {{"perm", perm}}, hint), want, shape};
  }

  /** x summed over its labels outside `keep`. */
  Labelled reduce(const Labelled &x, const std::set<char> &keep, const std::string &hint) {
    std::vector<int64_t> axes;
    Labelled y{"", "", {}};
    for (size_t d = 0; d < x.labels.size(); ++d) {
      if (keep.count(x.labels[d])) {
        y.labels += x.labels[d];
        y.shape.push_back(x.shape[d]);
      } else {
        axes.push_back(static_cast<int64_t>(d));
      }
    }
    if (axes.empty()) return x;
    y.name = c_.op(OpKind::ReduceSum, {x.name}, {{"axes", axes}, {"keepdims", int64_t{0}}}, hint);
    return y;
  }

  /** x's diagonal over its two dims labelled l (of one size n): x times the identity over those dims, summed over the
   *  second; its labels lose the second l. */
  Labelled diagonal(const Labelled &x, char l, DType dtype) {
    size_t p1 = x.labels.find(l), p2 = x.labels.find(l, p1 + 1);
    int64_t n = x.shape[p1];
    if (x.shape[p2] != n)
      n_.fail("label '" + std::string(1, l) + "' repeats with sizes " + std::to_string(n) + " and " +
              std::to_string(x.shape[p2]));
    Shape eye_shape(x.shape.size(), 1);
    eye_shape[p1] = eye_shape[p2] = n;
    std::vector<double> eye(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i) eye[static_cast<size_t>(i * n + i)] = 1.0;
    std::string masked = c_.op(OpKind::Mul, {x.name, c_.constant(dtype, eye_shape, eye, "eye")}, {}, "diagonal_mask");
    Labelled y{"", x.labels, x.shape};
    y.labels.erase(p2, 1);
    y.shape.erase(y.shape.begin() + static_cast<std::ptrdiff_t>(p2));
    y.name = c_.op(OpKind::ReduceSum, {masked}, {{"axes", std::vector<int64_t>{static_cast<int64_t>(p2)}},
                                                 {"keepdims", int64_t{0}}}, "diagonal");
    return y;
  }

  /** The contraction of a and b keeping the labels in `keep`: batch labels (both, kept), a's and b's own kept labels,
   *  and the summed labels (both, not kept) as [batch, a's, summed] x [batch, summed, b's] -> [batch, a's, b's]. */
  Labelled contract(Labelled a, Labelled b, const std::set<char> &keep) {
    std::set<char> a_keep = keep, b_keep = keep;
    for (char l : b.labels) a_keep.insert(l);
    for (char l : a.labels) b_keep.insert(l);
    a = reduce(a, a_keep, "sum_a");
    b = reduce(b, b_keep, "sum_b");
    std::string batch, left, right, summed;
    for (char l : a.labels) {
      bool in_b = b.labels.find(l) != std::string::npos;
      (in_b ? (keep.count(l) ? batch : summed) : left) += l;
    }
    for (char l : b.labels)
      if (a.labels.find(l) == std::string::npos) right += l;
    auto size = [&](const Labelled &x, char l) { return x.shape[x.labels.find(l)]; };
    for (char l : batch + summed)
      if (size(a, l) != size(b, l))
        n_.fail("label '" + std::string(1, l) + "' has size " + std::to_string(size(a, l)) + " in one operand and " +
                std::to_string(size(b, l)) + " in another");
    auto prod = [&](const Labelled &x, const std::string &ls) {
      int64_t p = 1;
      for (char l : ls) p *= size(x, l);
      return p;
    };
    int64_t nb = prod(a, batch), nl = prod(a, left), nk = prod(a, summed), nr = prod(b, right);
    Labelled at = transpose(a, batch + left + summed, "a_t"), bt = transpose(b, batch + summed + right, "b_t");
    std::string am = c_.reshape(at.name, {nb, nl, nk}, "a_3d"), bm = c_.reshape(bt.name, {nb, nk, nr}, "b_3d");
    Labelled y{c_.op(OpKind::MatMul, {am, bm}, {}, "product"), batch + left + right, {}};
    for (char l : batch + left) y.shape.push_back(size(a, l));
    for (char l : right) y.shape.push_back(size(b, l));
    y.name = c_.reshape(y.name, y.shape, "product_nd");
    return y;
  }

  Chain &chain() { return c_; }

 private:
  const NodeCtx &n_;
  Chain c_;
};

}  // namespace

void translate_einsum(Importer &im, const NodeCtx &n) {
  std::string eq;
  for (char ch : n.attrs.get_string("equation", "")) if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), out;
  std::vector<Labelled> ops;
  for (size_t at = 0; at <= lhs.size();) {
    size_t comma = std::min(lhs.find(',', at), lhs.size());
    ops.push_back({"", lhs.substr(at, comma - at), {}});
    at = comma + 1;
  }
  if (ops.size() != n.num_in()) n.fail("equation \"" + eq + "\" has " + std::to_string(ops.size()) + " operands, the node " +
                                       std::to_string(n.num_in()) + " inputs");
  if (ops.size() > 4) unsupported(n, "more than 4 operands are not supported");
  // An ellipsis stands for the dims no letter names, right-aligned across operands as numpy broadcasts them: it is
  // spelled with letters the equation does not use, the last ones for an operand with fewer such dims.
  std::string ellipsis;
  if (eq.find("...") != std::string::npos) {
    std::vector<int64_t> rank(ops.size(), 0);
    size_t widest = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      size_t dots = ops[i].labels.find("...");
      if (dots == std::string::npos) continue;
      auto letters = static_cast<int64_t>(ops[i].labels.size()) - 3;
      rank[i] = static_cast<int64_t>(im.type_of(n.in(i), n).shape.size()) - letters;
      if (rank[i] < 0 || ops[i].labels.find("...", dots + 3) != std::string::npos)
        n.fail("operand " + std::to_string(i) + " \"" + ops[i].labels + "\" does not fit its rank");
      widest = std::max(widest, static_cast<size_t>(rank[i]));
    }
    for (char l = 'A'; ellipsis.size() < widest && l <= 'z'; l = l == 'Z' ? 'a' : static_cast<char>(l + 1))
      if (eq.find(l) == std::string::npos) ellipsis += l;
    if (ellipsis.size() < widest) unsupported(n, "the ellipsis spans more dims than there are unused letters");
    for (size_t i = 0; i < ops.size(); ++i) {
      size_t dots = ops[i].labels.find("...");
      if (dots != std::string::npos)
        ops[i].labels.replace(dots, 3, ellipsis.substr(widest - static_cast<size_t>(rank[i])));
    }
    if (size_t dots = arrow == std::string::npos ? arrow : eq.find("...", arrow); dots != std::string::npos)
      eq.replace(dots, 3, ellipsis);  // the output's ellipsis
  }
  EinsumLowering e(im, n);
  std::map<char, int> count;
  for (size_t i = 0; i < ops.size(); ++i) {
    TensorType type = im.type_of(n.in(i), n);
    ops[i].name = n.in(i);
    ops[i].shape = type.shape;
    if (ops[i].labels.size() != ops[i].shape.size())
      n.fail("operand " + std::to_string(i) + " \"" + ops[i].labels + "\" has " + std::to_string(ops[i].labels.size()) +
             " labels for rank " + std::to_string(ops[i].shape.size()));
    for (char l : ops[i].labels) {
      if (!std::isalpha(static_cast<unsigned char>(l))) n.fail("equation \"" + eq + "\" has a label that is not a letter");
      ++count[l];  // a repeated label counts twice: implicitly "ii" is the trace, as in numpy
    }
    // A label repeated within an operand takes its diagonal ("ii->i", "bii->bi"), pair by pair.
    for (size_t d = 0; d < ops[i].labels.size(); ++d)
      while (ops[i].labels.find(ops[i].labels[d], d + 1) != std::string::npos)
        ops[i] = e.diagonal(ops[i], ops[i].labels[d], type.dtype);
  }
  if (arrow == std::string::npos) {  // implicit output: the ellipsis's dims, then the labels seen once, in order
    out = ellipsis;
    for (const auto &[l, k] : count)
      if (k == 1 && ellipsis.find(l) == std::string::npos) out += l;
  } else {
    out = eq.substr(arrow + 2);
    for (char l : out)
      if (!count.count(l) || std::count(out.begin(), out.end(), l) > 1)
        n.fail("output label '" + std::string(1, l) + "' is not one operand label, once");
  }
  // Left to right, each contraction keeping the labels the output or a later operand has.
  Labelled acc = ops[0];
  for (size_t i = 1; i <= ops.size(); ++i) {
    std::set<char> keep(out.begin(), out.end());
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    if (i == ops.size()) {
      acc = e.reduce(acc, keep, "sum");
      break;
    }
    acc = e.contract(acc, ops[i], keep);
  }
  acc = e.transpose(acc, out, "out");
  e.chain().op(OpKind::Identity, {acc.name}, {}, "", n.out(0));
}

}  // namespace cleave
