// Region analysis: owned boxes of shardings and read boxes of op descriptions (contract in region.h).
#include "planner/plan/region.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>

#include "ir/error.h"

namespace cleave::plan {
namespace {

using describe::Affine;
using describe::Description;
using describe::Expr;
using describe::ExprPtr;
using describe::Index;
using describe::VarRole;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }
int64_t mod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

/** x with a*x = 1 (mod m), for gcd(a, m) = 1. */
int64_t mod_inverse(int64_t a, int64_t m) {
  int64_t old_r = mod(a, m), r = m, old_s = 1, s = 0;
  while (r != 0) {
    int64_t q = old_r / r;
    std::tie(old_r, r) = std::make_pair(r, old_r - q * r);
    std::tie(old_s, s) = std::make_pair(s, old_s - q * s);
  }
  return mod(old_s, m);
}

/** coef * v for v in [lo, hi] (inclusive). */
struct Term {
  int64_t coef, lo, hi;
};

struct Range {
  int64_t lo, hi;  // inclusive
};

/** Smallest and largest value of r + c*v over v in [lo, hi] with L <= value <= H and value = 0 (mod D). */
std::optional<Range> solve_one(Term t, int64_t r, int64_t D, int64_t L, int64_t H) {
  if (t.coef < 0) t = {-t.coef, -t.hi, -t.lo};
  int64_t c = t.coef;
  int64_t vmin = std::max(t.lo, ceil_div(L - r, c)), vmax = std::min(t.hi, floor_div(H - r, c));
  if (vmin > vmax) return std::nullopt;
  // c*v = -r (mod D): solvable iff gcd(c, D) divides r; then v = v0 (mod D / gcd).
  int64_t g = std::gcd(c, D);
  if (mod(r, g) != 0) return std::nullopt;
  int64_t m = D / g;
  int64_t v0 = m == 1 ? 0 : mod(mod(-r / g, m) * mod_inverse(c / g, m), m);
  int64_t first = vmin + mod(v0 - vmin, m), last = vmax - mod(vmax - v0, m);
  if (first > last) return std::nullopt;
  return Range{r + c * first, r + c * last};
}

constexpr int64_t kEnumerationLimit = 1 << 16;

/** Smallest and largest value of r0 + sum(terms) with L <= value <= H and value = 0 (mod D), or nullopt if none:
 *  exact by enumerating every term but the widest (if they span at most kEnumerationLimit points), else the
 *  interval hull rounded to multiples of D. */
std::optional<Range> reachable(std::vector<Term> terms, int64_t r0, int64_t D, int64_t L, int64_t H) {
  for (const Term &t : terms)
    if (t.lo > t.hi) return std::nullopt;
  if (terms.empty()) {
    if (r0 < L || r0 > H || mod(r0, D) != 0) return std::nullopt;
    return Range{r0, r0};
  }
  size_t widest = 0;
  for (size_t i = 1; i < terms.size(); ++i)
    if (terms[i].hi - terms[i].lo > terms[widest].hi - terms[widest].lo) widest = i;
  Term free = terms[widest];
  terms.erase(terms.begin() + static_cast<int64_t>(widest));
  int64_t combos = 1;
  for (const Term &t : terms) combos = std::min(kEnumerationLimit + 1, combos * (t.hi - t.lo + 1));
  if (combos > kEnumerationLimit) {
    int64_t lo = r0, hi = r0;
    for (const Term &t : terms) {
      lo += std::min(t.coef * t.lo, t.coef * t.hi);
      hi += std::max(t.coef * t.lo, t.coef * t.hi);
    }
    lo += std::min(free.coef * free.lo, free.coef * free.hi);
    hi += std::max(free.coef * free.lo, free.coef * free.hi);
    lo = ceil_div(std::max(lo, L), D) * D;
    hi = floor_div(std::min(hi, H), D) * D;
    if (lo > hi) return std::nullopt;
    return Range{lo, hi};
  }
  std::optional<Range> best;
  std::vector<int64_t> v(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) v[i] = terms[i].lo;
  for (;;) {
    int64_t r = r0;
    for (size_t i = 0; i < terms.size(); ++i) r += terms[i].coef * v[i];
    if (std::optional<Range> one = solve_one(free, r, D, L, H)) {
      if (!best) best = one;
      best->lo = std::min(best->lo, one->lo);
      best->hi = std::max(best->hi, one->hi);
    }
    size_t k = 0;
    while (k < terms.size() && v[k] == terms[k].hi) v[k] = terms[k].lo, ++k;
    if (k == terms.size()) break;
    ++v[k];
  }
  return best;
}

class Analyzer {
 public:
  Analyzer(const Description &d, const std::vector<Interval> &ranges) : d_(d), ranges_(ranges) {
    CLEAVE_CHECK(ranges.size() == d.vars.size(), "var ranges of ", d.output_name);
    for (size_t i = 0; i < d.vars.size(); ++i)
      if (d.vars[i].opaque && !d.vars[i].synced) ranges_[i] = {0, d.vars[i].extent};
    for (const describe::OperandInfo &o : d.operands) region_.operands.push_back({o.slot, o.name, {}});
    seen_.assign(region_.operands.size(), false);
  }

  OpRegion run() {
    for (size_t i = 0; i < d_.vars.size(); ++i)
      if (d_.vars[i].role == VarRole::reduction && !d_.vars[i].synced && ranges_[i] != Interval{0, d_.vars[i].extent})
        region_.partial = true;
    for (size_t k = 0; k < d_.output_index.size(); ++k) {
      std::optional<Range> r = affine_range(d_.output_index[k], 1, 0, d_.output_shape[k] - 1);
      region_.output.push_back(r ? Interval{r->lo, r->hi + 1} : Interval{0, 0});
    }
    visit(d_.body);
    visit(d_.post);
    for (size_t i = 0; i < region_.operands.size(); ++i)
      if (!seen_[i]) region_.operands[i].box = Box(shape_of(region_.operands[i].slot).size(), Interval{0, 0});
    return region_;
  }

 private:
  const Shape &shape_of(int slot) const {
    for (const describe::OperandInfo &o : d_.operands)
      if (o.slot == slot) return o.shape;
    CLEAVE_CHECK(false, "access to unknown operand slot ", slot, " in ", d_.output_name);
    static const Shape none;
    return none;
  }

  std::optional<Range> affine_range(const Affine &a, int64_t div, int64_t L, int64_t H) const {
    std::vector<Term> terms;
    for (const auto &[v, c] : a.terms) {
      const Interval &r = ranges_[static_cast<size_t>(v)];
      terms.push_back({c, r.begin, r.end - 1});
    }
    return reachable(terms, a.constant, div, L, H);
  }

  void visit(const ExprPtr &e) {
    if (!e) return;
    for (const ExprPtr &a : e->args) visit(a);
    if (e->kind != Expr::Kind::access) return;
    const Shape &shape = shape_of(e->slot);
    Box box;
    for (size_t k = 0; k < e->index.size(); ++k) {
      const Index &ix = e->index[k];
      if (ix.indirect) {
        visit(ix.indirect);
        box.push_back({0, shape[k]});
        continue;
      }
      // In range: affine = div * i with 0 <= i < dim.
      std::optional<Range> r = affine_range(ix.affine, ix.div, 0, (shape[k] - 1) * ix.div);
      box.push_back(r ? Interval{r->lo / ix.div, r->hi / ix.div + 1} : Interval{0, 0});
    }
    if (box_empty(box)) return;  // every read of this access is padding
    for (size_t i = 0; i < region_.operands.size(); ++i) {
      OperandRegion &o = region_.operands[i];
      if (o.slot != e->slot) continue;
      if (!seen_[i]) {
        seen_[i] = true;
        o.box = box;
      } else {
        for (size_t k = 0; k < box.size(); ++k)
          o.box[k] = {std::min(o.box[k].begin, box[k].begin), std::max(o.box[k].end, box[k].end)};
      }
    }
  }

  const Description &d_;
  std::vector<Interval> ranges_;
  OpRegion region_;
  std::vector<bool> seen_;
};

}  // namespace

bool box_empty(const Box &b) {
  return std::any_of(b.begin(), b.end(), [](const Interval &i) { return i.empty(); });
}

std::string box_str(const Box &b) {
  if (b.empty()) return "[]";
  std::string s;
  for (size_t i = 0; i < b.size(); ++i)
    s += (i ? "x[" : "[") + std::to_string(b[i].begin) + "," + std::to_string(b[i].end) + ")";
  return s;
}

int64_t box_volume(const Box &b) {
  int64_t v = 1;
  for (const Interval &i : b) v *= i.size();
  return v;
}

Box box_intersect(const Box &a, const Box &b) {
  Box r(a.size());
  for (size_t d = 0; d < a.size(); ++d) r[d] = {std::max(a[d].begin, b[d].begin), std::min(a[d].end, b[d].end)};
  return r;
}

int64_t box_overlap(const Box &a, const Box &b) {
  return a.size() == b.size() ? box_volume(box_intersect(a, b)) : 0;
}

Sharding without_partial(Sharding s) {
  for (AxisSharding &a : s.axes)
    if (a.kind == AxisSharding::Kind::partial) a = AxisSharding{};
  return s;
}

Box full_box(const Shape &shape) {
  Box b;
  for (int64_t d : shape) b.push_back({0, d});
  return b;
}

std::vector<int64_t> mesh_coords(const std::vector<int64_t> &mesh, int64_t index) {
  std::vector<int64_t> c(mesh.size());
  for (size_t i = mesh.size(); i-- > 0;) {
    c[i] = index % mesh[i];
    index /= mesh[i];
  }
  return c;
}

Interval split_block(int64_t extent, const std::vector<int64_t> &mesh, const std::vector<int> &axes,
                     const std::vector<int64_t> &coords) {
  int64_t parts = 1, which = 0;
  for (int a : axes) {
    parts *= mesh[static_cast<size_t>(a)];
    which = which * mesh[static_cast<size_t>(a)] + coords[static_cast<size_t>(a)];
  }
  CLEAVE_CHECK(extent % parts == 0, "split of ", extent, " into ", parts, " parts");
  int64_t block = extent / parts;
  return {which * block, (which + 1) * block};
}

Box shard_region(const Shape &shape, const Sharding &sharding, int64_t index) {
  std::vector<int64_t> coords = mesh_coords(sharding.mesh, index);
  Box b = full_box(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int> axes;
    for (size_t a = 0; a < sharding.axes.size(); ++a)
      if (sharding.axes[a].kind == AxisSharding::Kind::split && sharding.axes[a].dim == static_cast<int>(d))
        axes.push_back(static_cast<int>(a));
    if (!axes.empty()) b[d] = split_block(shape[d], sharding.mesh, axes, coords);
  }
  return b;
}

std::vector<Interval> var_ranges(const describe::Description &d, const ParallelConfig &config, int64_t index) {
  std::vector<int64_t> coords = mesh_coords(config.mesh, index);
  std::vector<Interval> r;
  for (const describe::LoopVar &v : d.vars) {
    std::vector<int> axes;
    for (size_t a = 0; a < config.vars.size(); ++a)
      if (config.vars[a] == v.name) axes.push_back(static_cast<int>(a));
    r.push_back(axes.empty() ? Interval{0, v.extent} : split_block(v.extent, config.mesh, axes, coords));
  }
  return r;
}

OpRegion op_region(const describe::Description &d, const std::vector<Interval> &ranges) {
  return Analyzer(d, ranges).run();
}

std::vector<std::optional<Box>> op_input_regions(const Graph &g, const Op &op, const ParallelConfig &config,
                                                 int64_t index) {
  return op_input_regions(op, describe::describe(g, op), config, index);
}

namespace {

/** A convolution's or pool's X read whole along each spatial dim that no split var indexes. Its kernel
 *  (codegen/kernels_window.cpp) computes such a dim from the op's own pads, so rows no window reaches (the last row
 *  of an even size under a 1x1 stride-2 convolution) cost nothing to include, and the kernel then reads X's shard as
 *  it is instead of a copy cut from it. */
void widen_window_input(const Op &op, const describe::Description &d, const ParallelConfig &config,
                        std::vector<std::optional<Box>> &out) {
  int slot = op.kind == OpKind::Conv || op.kind == OpKind::MaxPool || op.kind == OpKind::AveragePool ? 0
             : op.kind == OpKind::ConvGradFilter                                                    ? 1
                                                                                                     : -1;
  if (slot < 0 || !out[static_cast<size_t>(slot)]) return;
  std::vector<const describe::Expr *> reads = describe::accesses(d.body, slot);
  if (reads.empty()) return;
  const describe::Expr *x = reads.front();
  Box &box = *out[static_cast<size_t>(slot)];
  auto operand = std::find_if(d.operands.begin(), d.operands.end(),
                              [&](const describe::OperandInfo &o) { return o.slot == slot; });
  if (operand == d.operands.end()) return;
  const Shape &full = operand->shape;
  if (full.size() != box.size() || x->index.size() != box.size()) return;
  for (size_t dim = 2; dim < box.size(); ++dim) {
    bool split = false;
    for (const auto &[var, coef] : x->index[dim].affine.terms)
      split = split || std::find(config.vars.begin(), config.vars.end(), d.vars.at(static_cast<size_t>(var)).name) !=
                           config.vars.end();
    if (!split) box[dim] = {0, full[dim]};
  }
}

}  // namespace

std::vector<std::optional<Box>> op_input_regions(const Op &op, const std::vector<describe::Description> &descs,
                                                 const ParallelConfig &config, int64_t index) {
  std::vector<std::optional<Box>> out(op.inputs.size());
  for (size_t k = 0; k < descs.size(); ++k) {
    if (op.output(k) == kNoTensor) continue;
    OpRegion r = op_region(descs[k], var_ranges(descs[k], config, index));
    for (const OperandRegion &o : r.operands) {
      if (box_empty(o.box)) continue;
      std::optional<Box> &have = out.at(static_cast<size_t>(o.slot));
      if (!have) {
        have = o.box;
        continue;
      }
      for (size_t d = 0; d < o.box.size(); ++d)
        (*have)[d] = {std::min((*have)[d].begin, o.box[d].begin), std::max((*have)[d].end, o.box[d].end)};
    }
  }
  if (!descs.empty()) widen_window_input(op, descs[0], config, out);
  return out;
}

bool box_contains(const Box &outer, const Box &inner) {
  for (size_t d = 0; d < outer.size(); ++d)
    if (inner[d].begin < outer[d].begin || inner[d].end > outer[d].end) return false;
  return true;
}

namespace {

/** The range [lo, hi) of the row-major flattening of dims `dims` (indices into shape and box) that box `b` covers,
 *  or false when it is not one contiguous range (a dim partial while a dim inside it is not whole). */
bool flat_range(const Box &b, const Shape &shape, const std::vector<size_t> &dims, int64_t &lo, int64_t &hi) {
  int64_t stride = 1;
  lo = hi = 0;
  bool inner_full = true;
  for (size_t k = dims.size(); k-- > 0;) {
    size_t d = dims[k];
    if (!inner_full && b[d].size() != 1) return false;
    lo += b[d].begin * stride;
    hi += (b[d].end - 1) * stride;
    if (b[d].begin != 0 || b[d].end != shape[d]) inner_full = false;
    stride *= shape[d];
  }
  hi += 1;
  return true;
}

}  // namespace

bool update_writes_in_place(const Graph &g, const Assign &a, const Sharding &src, const Sharding &dst) {
  OpId producer = g.tensor(a.src).producer;
  if (producer == kNoOp || !(src == dst) || g.tensor(a.src).dtype != g.tensor(a.dst).dtype) return false;
  const Op &op = g.op(producer);
  // The input each output replaces: SGD (param) -> param'; Momentum (param, grad, velocity) -> (param', velocity');
  // Adam (param, grad, m, v) -> (param', m', v').
  std::vector<size_t> replaces;
  switch (op.kind) {
    case OpKind::SGDUpdate: replaces = {0}; break;
    case OpKind::MomentumUpdate: replaces = {0, 2}; break;
    case OpKind::AdamUpdate: replaces = {0, 2, 3}; break;
    default: return false;
  }
  size_t k = static_cast<size_t>(std::find(op.outputs.begin(), op.outputs.end(), a.src) - op.outputs.begin());
  if (k >= replaces.size() || replaces[k] >= op.inputs.size() || op.inputs[replaces[k]] != a.dst) return false;
  // Ops are in topological order: a reader of the destination after the update would see the new value. (The
  // updates end the op list, so this looks at the other updates only.)
  for (OpId c = producer + 1; c < g.num_ops(); ++c)
    if (std::find(g.op(c).inputs.begin(), g.op(c).inputs.end(), a.dst) != g.op(c).inputs.end()) return false;
  return true;
}

bool reshape_boxes_ok(const Box &in, const Shape &in_shape, const Box &out, const Shape &out_shape) {
  std::vector<size_t> xd, yd;
  for (size_t d = 0; d < in_shape.size(); ++d)
    if (in_shape[d] != 1) xd.push_back(d);
  for (size_t d = 0; d < out_shape.size(); ++d)
    if (out_shape[d] != 1) yd.push_back(d);
  size_t i = 0, j = 0;
  while (i < xd.size() || j < yd.size()) {
    if (i == xd.size() || j == yd.size()) return false;
    std::vector<size_t> gx{xd[i]}, gy{yd[j]};
    int64_t px = in_shape[xd[i++]], py = out_shape[yd[j++]];
    while (px != py) {
      if (px < py && i < xd.size()) {
        gx.push_back(xd[i]);
        px *= in_shape[xd[i++]];
      } else if (py < px && j < yd.size()) {
        gy.push_back(yd[j]);
        py *= out_shape[yd[j++]];
      } else {
        return false;
      }
    }
    int64_t a0, a1, b0, b1;
    if (!flat_range(in, in_shape, gx, a0, a1) || !flat_range(out, out_shape, gy, b0, b1) || a0 != b0 || a1 != b1)
      return false;
  }
  return true;
}

namespace {

bool pairwise_disjoint(const std::vector<Box> &boxes) {
  for (size_t i = 0; i < boxes.size(); ++i)
    for (size_t j = i + 1; j < boxes.size(); ++j)
      if (!box_empty(box_intersect(boxes[i], boxes[j]))) return false;
  return true;
}

}  // namespace

bool tiles(const std::vector<Box> &blocks, const Box &whole) {
  if (blocks.size() < 2 || whole.empty()) return false;
  int64_t size = box_volume(blocks[0]), total = 0;
  for (const Box &b : blocks) {
    if (b.size() != whole.size() || box_empty(b) || box_volume(b) != size || !box_contains(whole, b)) return false;
    total += size;
  }
  return total == box_volume(whole) && pairwise_disjoint(blocks);
}

bool concatenates(const std::vector<Box> &blocks, const Box &whole) {
  // Block i must be rows [i*k, (i+1)*k) of the first dim of `whole` that is not 1 wide, with every later dim whole
  // and every earlier dim of width 1.
  int64_t next = 0;
  for (const Box &b : blocks) {
    size_t d = 0;
    while (d < whole.size() && whole[d].size() == 1) ++d;
    if (d == whole.size()) return false;
    for (size_t e = 0; e < whole.size(); ++e)
      if (e != d && b[e] != whole[e]) return false;
    if (b[d].begin - whole[d].begin != next) return false;
    next = b[d].end - whole[d].begin;
  }
  return !blocks.empty();
}

bool all_to_all_pattern(const std::vector<Box> &owned, const std::vector<Box> &wanted) {
  size_t n = owned.size();
  if (n < 2 || wanted.size() != n || !pairwise_disjoint(owned)) return false;
  int64_t size = -1;
  for (size_t j = 0; j < n; ++j) {
    int64_t covered = 0;
    for (size_t i = 0; i < n; ++i) {
      Box part = box_intersect(owned[i], wanted[j]);
      if (box_empty(part)) return false;
      int64_t e = box_volume(part);
      if (size < 0) size = e;
      if (e != size) return false;
      covered += e;
    }
    if (covered != box_volume(wanted[j])) return false;
  }
  return true;
}

std::vector<std::vector<int>> axes_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          const std::vector<size_t> &axes) {
  // Devices are laid out row-major, so visiting them in order lists each group's members row-major along `axes`.
  std::map<std::vector<int64_t>, std::vector<int>> groups;
  for (size_t i = 0; i < devices.size(); ++i) {
    std::vector<int64_t> c = mesh_coords(mesh, static_cast<int64_t>(i));
    for (size_t a : axes) c[a] = 0;
    groups[c].push_back(devices[i]);
  }
  std::vector<std::vector<int>> out;
  for (auto &[key, members] : groups) out.push_back(std::move(members));
  return out;
}

std::vector<std::vector<int>> axis_groups(const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                                          size_t axis) {
  return axes_groups(devices, mesh, {axis});
}

bool partial_ok(OpKind kind, DType dtype) {
  if (!is_float(dtype)) return false;
  switch (kind) {
    case OpKind::Gemm:
    case OpKind::MatMul:
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:  // its kernel divides by the whole reduced count: each shard's share of the mean
    case OpKind::Conv:
    case OpKind::ConvGradData:
    case OpKind::ConvGradFilter:
    case OpKind::ConvTranspose:
    // A plain-mean or sum loss split on its positions: each rank's share of the global mean or sum.
    case OpKind::SoftmaxCrossEntropyLoss:
    case OpKind::NegativeLogLikelihoodLoss:
    case OpKind::LayerNormalizationGrad:  // dscale/dB are sums over the rows; dX is never partial (rows are outputs)
    case OpKind::GatherGrad:  // a split over the indices sums each rank's scatter
    case OpKind::GatherNDGrad:  // so does a split over GatherND's index tuples
    case OpKind::InstanceNormalizationGrad:  // dscale/dB are sums over the batch; dX is never partial
      return true;
    default:
      return false;
  }
}

}  // namespace cleave::plan
