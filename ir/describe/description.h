#pragma once
// Op descriptions (DESIGN §2; Tofu's TDL, Shardy's factor rules): what an op computes, as an index expression over
// its inputs, e.g.
//   Y[b,co,y,x] = sum(ci,ky,kx) X[b,ci,y*2+ky-1,x*2+kx-1] * W[co,ci,ky,kx]
//
// A Description holds loop variables (output vars, which index the output, and reduction vars, which are summed or
// maxed over), each with an extent; the output's index as affine expressions of the output vars; and a body
// expression tree whose leaves are accesses to the op's inputs at affine indexes. An access out of its tensor's
// range reads the access's padding value (0 unless set: windows with padding, shifted Concat pieces, strided
// transposed windows). A var marked opaque must not be split by the partitioner: it is how ops whose semantics need
// more than one pass over a dim (Softmax, BatchNorm statistics, weighted-mean losses) are described honestly, via an
// opaque function call over that dim.
//
// A var may further be marked synced (Builder::synced): the op's kernel can still split it, by exchanging per-shard
// statistics with the other ranks that split it (BatchNorm's batch sums and sums of squares, a weighted-mean loss's
// weight total). Splitting a synced var splits the outputs it indexes, like an output var, and leaves every other
// output whole on each rank (replicated, never partial): the kernel all-reduces what it needs before finishing. The
// evaluator and FLOP count ignore the mark; region analysis gives a synced var its block, not its whole extent.
//
// Semantics of a Description d with output O:
//   for every value of the output vars:  O[d.output_index] = post(reduce over the reduction vars of body)
// where reduce is sum / max / argmax (flat index into the first access's tensor) / mean (over the points where every
// access is in range) / none (no reduction vars), post defaults to the reduced value itself, and output points the
// output index never reaches are 0. The output index is injective in the output vars.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace cleave::describe {

/** Index of a LoopVar in its Description. */
struct Var {
  int id = -1;
};

/** sum(coef * var) + constant; terms sorted by var id, no zero coefficients. */
struct Affine {
  std::vector<std::pair<int, int64_t>> terms;
  int64_t constant = 0;

  Affine() = default;
  Affine(int64_t c) : constant(c) {}  // NOLINT: constants read naturally in index lists
  Affine(Var v) : terms{{v.id, 1}} {}  // NOLINT
  int64_t coef(int var) const;
  bool is_constant() const { return terms.empty(); }
};
Affine operator+(const Affine &a, const Affine &b);
Affine operator-(const Affine &a, const Affine &b);
Affine operator*(const Affine &a, int64_t k);
Affine operator*(int64_t k, const Affine &a);
inline Affine operator*(Var v, int64_t k) { return Affine(v) * k; }
inline Affine operator+(Var a, Var b) { return Affine(a) + Affine(b); }
inline Affine operator+(Var a, int64_t b) { return Affine(a) + Affine(b); }
inline Affine operator-(Var a, int64_t b) { return Affine(a) - Affine(b); }

enum class Fn : uint8_t {
  add, sub, mul, div, pow,                                  // binary arithmetic
  neg, exp, log, sqrt, erf, relu, sigmoid, tanh, step,      // unary; step(x) = x > 0 ? 1 : 0
  abs, floor, ceil, round, sign,                            // unary; round: halves to even; sign(NaN) = 0
  round_bf16,                                               // unary: to the nearest bfloat16, ties to even
  round_fp16,                                               // unary: to the nearest binary16, ties to even
  sin, cos, tan, asin, acos, atan,                          // unary, C's functions
  sinh, cosh, asinh, acosh, atanh,                          // unary, C's functions
  max, min,                                                 // binary; NaN if either operand is NaN
  eq,                                                       // eq(a, b) = a == b ? 1 : 0
  where,                                                    // where(c, a, b) = c != 0 ? a : b
  opaque,                                                   // named function the evaluator cannot compute
};
/** "+", "exp", ... or the opaque function's name. */
std::string fn_name(Fn f);

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

/** One index of an access: (affine [+ value of `indirect`]) / div; a non-exact division reads the padding value. */
struct Index {
  Affine affine;
  int64_t div = 1;
  /** Data-dependent index (Gather): the value of this access is added; negative values wrap once (ONNX Gather). */
  ExprPtr indirect;
};

struct Expr {
  enum class Kind : uint8_t { access, constant, var_value, call, reduced, step_count };
  Kind kind = Kind::constant;
  // access
  int slot = -1;         // op input slot
  std::string name;      // operand name (access) or opaque function name (call)
  std::vector<Index> index;
  double pad = 0;        // value read out of range
  // constant
  double value = 0;
  // var_value: the value of an affine expression of the loop vars
  Affine affine;
  // call
  Fn fn = Fn::add;
  std::vector<ExprPtr> args;
  /** call opaque: estimated FLOPs per evaluation (for the cost model). */
  int64_t flops = 1;
};

/** Fluent expression handle. */
class E {
 public:
  E() = default;
  E(double v);  // NOLINT: constants read naturally in bodies
  explicit E(ExprPtr p) : p_(std::move(p)) {}
  const ExprPtr &ptr() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  ExprPtr p_;
};
E operator+(const E &a, const E &b);
E operator-(const E &a, const E &b);
E operator*(const E &a, const E &b);
E operator/(const E &a, const E &b);
E operator-(const E &a);
E call(Fn f, std::vector<E> args);
E opaque(const std::string &name, std::vector<E> args, int64_t flops_per_point = 1);
inline E exp(const E &a) { return call(Fn::exp, {a}); }
inline E log(const E &a) { return call(Fn::log, {a}); }
inline E sqrt(const E &a) { return call(Fn::sqrt, {a}); }
inline E erf(const E &a) { return call(Fn::erf, {a}); }
inline E relu(const E &a) { return call(Fn::relu, {a}); }
inline E sigmoid(const E &a) { return call(Fn::sigmoid, {a}); }
inline E tanh(const E &a) { return call(Fn::tanh, {a}); }
inline E step(const E &a) { return call(Fn::step, {a}); }
inline E abs(const E &a) { return call(Fn::abs, {a}); }
inline E floor(const E &a) { return call(Fn::floor, {a}); }
inline E ceil(const E &a) { return call(Fn::ceil, {a}); }
inline E round(const E &a) { return call(Fn::round, {a}); }
inline E sign(const E &a) { return call(Fn::sign, {a}); }
inline E round_bf16(const E &a) { return call(Fn::round_bf16, {a}); }
inline E round_fp16(const E &a) { return call(Fn::round_fp16, {a}); }
inline E sin(const E &a) { return call(Fn::sin, {a}); }
inline E cos(const E &a) { return call(Fn::cos, {a}); }
inline E tan(const E &a) { return call(Fn::tan, {a}); }
inline E asin(const E &a) { return call(Fn::asin, {a}); }
inline E acos(const E &a) { return call(Fn::acos, {a}); }
inline E atan(const E &a) { return call(Fn::atan, {a}); }
inline E sinh(const E &a) { return call(Fn::sinh, {a}); }
inline E cosh(const E &a) { return call(Fn::cosh, {a}); }
inline E asinh(const E &a) { return call(Fn::asinh, {a}); }
inline E acosh(const E &a) { return call(Fn::acosh, {a}); }
inline E atanh(const E &a) { return call(Fn::atanh, {a}); }
inline E max(const E &a, const E &b) { return call(Fn::max, {a, b}); }
inline E min(const E &a, const E &b) { return call(Fn::min, {a, b}); }
inline E pow(const E &a, const E &b) { return call(Fn::pow, {a, b}); }
inline E eq(const E &a, const E &b) { return call(Fn::eq, {a, b}); }
inline E where(const E &c, const E &a, const E &b) { return call(Fn::where, {c, a, b}); }
/** The value of an affine expression of the loop vars (e.g. a class index compared with a label). */
E value_of(const Affine &a);
/** The training step t (from 1): Adam's bias correction. */
E step_count();
/** The reduced value, for use in a post expression. */
E reduced();

/** An index of an access: affine, strided-transposed (affine / div) or data-dependent. */
struct Ix {
  Index index;
  Ix(Affine a) { index.affine = std::move(a); }                          // NOLINT
  Ix(Var v) { index.affine = Affine(v); }                                 // NOLINT
  Ix(int64_t c) { index.affine = Affine(c); }                             // NOLINT
  Ix(int c) { index.affine = Affine(static_cast<int64_t>(c)); }           // NOLINT
  Ix(const E &indirect) { index.indirect = indirect.ptr(); }              // NOLINT
  /** a / div where exact (div > 0: the interval analyses divide ranges by it). */
  static Ix divided(Affine a, int64_t div) {
    CLEAVE_CHECK(div > 0, "index divisor ", div, " is not positive");
    Ix i(std::move(a));
    i.index.div = div;
    return i;
  }
};

/** An input operand of the op, to be accessed in a body. */
class Operand {
 public:
  Operand() = default;
  Operand(int slot, std::string name, Shape shape) : slot_(slot), name_(std::move(name)), shape_(std::move(shape)) {}
  E operator()(std::vector<Ix> idx, double pad = 0) const;
  E operator[](std::vector<Ix> idx) const { return (*this)(std::move(idx)); }
  int slot() const { return slot_; }
  const std::string &name() const { return name_; }
  const Shape &shape() const { return shape_; }

 private:
  int slot_ = -1;
  std::string name_;
  Shape shape_;
};

/** output: indexes the output; reduction: reduced by the Description's reduce; internal: consumed inside an opaque
 *  function (always opaque; its extent counts for FLOPs, nothing iterates it). */
enum class VarRole : uint8_t { output, reduction, internal };
enum class Reduce : uint8_t { none, sum, max, argmax, mean };

struct LoopVar {
  std::string name;
  int64_t extent = 1;
  VarRole role = VarRole::output;
  bool opaque = false;
  /** Splittable by a kernel that synchronises over the ranks splitting it (see the header comment). */
  bool synced = false;
};

/** How splitting a var over devices splits the output; synced: the kernel synchronises (the output is split if the
 *  var indexes it, else whole). */
enum class SplitKind : uint8_t { none, concat, partial, synced };

struct OperandInfo {
  int slot = -1;
  std::string name;
  Shape shape;
};

struct Description {
  std::string output_name;
  int output_slot = 0;
  Shape output_shape;
  std::vector<LoopVar> vars;
  std::vector<Affine> output_index;
  /** Operands that accesses refer to (by slot), in slot order. */
  std::vector<OperandInfo> operands;
  Reduce reduce = Reduce::none;
  ExprPtr body;
  /** Applied to the reduced value (Expr::Kind::reduced); null = the reduced value itself. */
  ExprPtr post;

  /** Var id by name, or -1. */
  int var(const std::string &name) const;
};

/** Builds one Description. Vars are declared first; operands come from the op's input slots. */
class Builder {
 public:
  Builder(const Graph &g, const Op &op, int output_slot, std::string output_name);
  Var out(const std::string &name, int64_t extent, bool opaque = false);
  Var sum(const std::string &name, int64_t extent, bool opaque = false);
  /** A dim an opaque function consumes whole (e.g. the class dim of a loss). */
  Var internal(const std::string &name, int64_t extent);
  /** Marks `v` synced (splittable with synchronisation inside the kernel) and returns it. */
  Var synced(Var v);
  /** Operand at input slot `slot`, printed as `name`. */
  Operand in(int slot, const std::string &name);
  /** Output shape (from the graph). */
  const Shape &out_shape() const { return d_.output_shape; }
  /** Finishes: O[index] = post(reduce(body)). */
  Description build(std::vector<Affine> index, Reduce reduce, const E &body, const E &post = E()) &&;

 private:
  const Graph &g_;
  const Op &op_;
  Description d_;
};

/** One Description per output slot of `op` (absent outputs included, so result[i] describes op.outputs[i]). Extents
 *  come from the op's tensor shapes, constants from its attributes. Throws UserError naming the op when its
 *  attributes are inconsistent. */
std::vector<Description> describe(const Graph &g, const Op &op);

/** One line: `Y[m,n] = sum(k) A[m,k] * B[k,n]  {m=4, n=5, k=3}` plus ` opaque(c)` where vars are opaque and
 *  ` synced(b)` where they are synced. */
std::string to_string(const Description &d);
std::string to_string(const Affine &a, const std::vector<LoopVar> &vars);

/** How splitting var `v` splits the output: synced (marked so), concat (output var), partial (reduction var) or none
 *  (opaque). */
SplitKind split_kind(const Description &d, int v);
/** Ids of the vars that may be split. */
std::vector<int> splittable_vars(const Description &d);
/** FLOPs of computing the output once: body ops per point of the full iteration space, one combine per reduction
 *  point, post ops per output point; opaque functions count their declared cost. Concat, written as a sum of
 *  shifted zero-padded reads, counts those adds although a kernel only copies. */
int64_t flops(const Description &d);
/** Sum of flops over the descriptions of all outputs. */
int64_t op_flops(const Graph &g, const Op &op);
/** True if the evaluator can compute it: no opaque function anywhere. */
bool is_evaluable(const Description &d);
/** Every operand read in `e` (of input `slot` only, when slot >= 0), the ones inside data-dependent indices included,
 *  in tree order (an access before its arguments' and its indices' reads). */
std::vector<const Expr *> accesses(const ExprPtr &e, int slot = -1);

/** A small graph holding one op of `kind` (named after the kind) with representative shapes and attributes, every
 *  input a source tensor. */
Graph example_op(OpKind kind);
/** The text `cleave describe KIND` prints: the example op's shapes and attributes and one description line per
 *  output. Accepts IR kind names and ONNX op types that import as another kind (Flatten, Squeeze, Unsqueeze ->
 *  Reshape, ...). UserError on an unknown name. */
std::string describe_kind(const std::string &name);

}  // namespace cleave::describe
