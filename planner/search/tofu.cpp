// The tofu planner: coarsening, the frontier DP per recursion step, recursion (tofu.h).
#include "planner/search/tofu.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/search/data_plan.h"
#include "planner/search/tofu_step.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;

constexpr int64_t kBruteForce = 64;
constexpr size_t kMaxStates = 128;



/** Per tensor, the tensor it stands for in the forward pass: a gradient `X.grad` (or `X.grad.K`, autodiff's names)
 *  stands for X, an assigned next value for the state it replaces; kNoTensor otherwise. */
std::vector<TensorId> counterparts(const Graph &g) {
  std::vector<TensorId> of(static_cast<size_t>(g.num_tensors()), kNoTensor);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    if (tensor.role != Role::grad) continue;
    std::string base = tensor.name;
    size_t dot = base.rfind('.');
    if (dot != std::string::npos && dot + 1 < base.size() &&
        base.find_first_not_of("0123456789", dot + 1) == std::string::npos)
      base.resize(dot);
    if (base.size() <= 5 || base.compare(base.size() - 5, 5, ".grad") != 0) continue;
    std::optional<TensorId> x = g.find_tensor(base.substr(0, base.size() - 5));
    if (x && g.tensor(*x).shape == tensor.shape) of[static_cast<size_t>(t)] = *x;
  }
  for (const Assign &a : g.assigns) of[static_cast<size_t>(a.src)] = a.dst;
  return of;
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)];
    return x;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

/** One output, as many elements as every input, no reduction: splits of its vars cut all operands alike. */
bool is_elementwise(const Graph &g, const Op &op, const std::vector<Description> &descs) {
  if (op.outputs.size() != 1 || op.outputs[0] == kNoTensor) return false;
  const Description &d = descs[0];
  for (const describe::LoopVar &v : d.vars)
    if (v.role != describe::VarRole::output || v.opaque) return false;
  for (TensorId t : op.inputs)
    if (t != kNoTensor && g.tensor(t).shape != g.tensor(op.outputs[0]).shape) return false;
  return !op.inputs.empty();
}

/** The choices tofu weighs for op `o`: its splits (Tofu partitions every op), and replicated compute too where
 *  `replicable` allows it (replicated_updates), first: ties go to it, since a replicated update leaves the later
 *  steps nothing to gather (the tiny CNN's 10-float bias costs the same split or whole on 2 devices, but split it
 *  is fetched by every later step). */
std::vector<int> tofu_choices(const StepModel &m, OpId o, const std::vector<char> &replicable) {
  std::vector<int> r = m.partitioning_choices(o);
  if (replicable[static_cast<size_t>(o)] && r.back() != m.none_choice(o)) r.insert(r.begin(), m.none_choice(o));
  return r;
}

/** Group-level view of one step: per group its choices (a choice per member), their internal costs, and the cost
 *  matrices of the edges between groups. */
class GroupProblem {
 public:
  GroupProblem(const Graph &g, StepModel &m, const std::vector<std::vector<OpId>> &groups,
               const std::vector<TensorId> &counterpart, const std::vector<char> &replicable)
      : g_(g), m_(m), groups_(groups), counterpart_(counterpart), replicable_(replicable) {
    group_of_.assign(static_cast<size_t>(g.num_ops()), -1);
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (OpId o : groups[gi]) group_of_[static_cast<size_t>(o)] = static_cast<int>(gi);
    for (size_t gi = 0; gi < groups.size(); ++gi) enumerate_choices(static_cast<int>(gi));
    for (int e = 0; e < static_cast<int>(m.edges().size()); ++e) {
      const StepModel::Edge &edge = m.edges()[static_cast<size_t>(e)];
      int a = group_of_[static_cast<size_t>(edge.owner)], b = group_of_[static_cast<size_t>(edge.consumer)];
      if (a != b) between_[{std::min(a, b), std::max(a, b)}].push_back(e);
    }
  }

  size_t num_groups() const { return groups_.size(); }
  size_t num_choices(int gi) const { return choices_[static_cast<size_t>(gi)].size(); }
  int64_t internal(int gi, int c) const { return internal_[static_cast<size_t>(gi)][static_cast<size_t>(c)]; }
  const std::map<std::pair<int, int>, std::vector<int>> &between() const { return between_; }

  /** Cost of the edges between groups a < b under choices ca, cb. */
  int64_t cross(int a, int b, int ca, int cb) {
    auto key = std::make_tuple(a, b, ca, cb);
    auto it = cross_.find(key);
    if (it != cross_.end()) return it->second;
    int64_t cost = 0;
    StepModel::Reads reads(m_);
    for (int e : between_.at({a, b})) {
      const StepModel::Edge &edge = m_.edges()[static_cast<size_t>(e)];
      cost += reads.add(e, op_choice(edge.owner, a, ca, cb), op_choice(edge.consumer, a, ca, cb));
    }
    cross_.emplace(key, cost);
    return cost;
  }

  /** The per-op choices of group choices `pick`. */
  std::vector<int> op_choices(const std::vector<int> &pick, int num_ops) const {
    std::vector<int> out(static_cast<size_t>(num_ops), 0);
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const std::vector<int> &c = choices_[gi][static_cast<size_t>(pick[gi])];
      for (size_t k = 0; k < groups_[gi].size(); ++k) out[static_cast<size_t>(groups_[gi][k])] = c[k];
    }
    return out;
  }

 private:
  int member(int gi, OpId o) const {
    const std::vector<OpId> &g = groups_[static_cast<size_t>(gi)];
    return static_cast<int>(std::lower_bound(g.begin(), g.end(), o) - g.begin());
  }
  int op_choice(OpId o, int a, int ca, int cb) const {
    int gi = group_of_[static_cast<size_t>(o)];
    int c = gi == a ? ca : cb;
    return choices_[static_cast<size_t>(gi)][static_cast<size_t>(c)][static_cast<size_t>(member(gi, o))];
  }

  /** Internal cost of group gi with its members (in order) under `pick`, counting only members [0, upto]. */
  int64_t internal_cost(int gi, const std::vector<int> &pick, size_t upto) {
    const std::vector<OpId> &g = groups_[static_cast<size_t>(gi)];
    int64_t cost = 0;
    StepModel::Reads reads(m_);
    for (size_t k = 0; k <= upto; ++k) {
      cost += m_.unary(g[k], pick[k]);
      for (int e : m_.edges_of(g[k])) {
        const StepModel::Edge &edge = m_.edges()[static_cast<size_t>(e)];
        if (edge.consumer != g[k] || group_of_[static_cast<size_t>(edge.owner)] != gi) continue;
        size_t j = static_cast<size_t>(member(gi, edge.owner));
        if (j <= upto) cost += reads.add(e, pick[j], pick[k]);
      }
    }
    return cost;
  }

  /** How far member `o` under choice `c` keeps the tensors it shares with the anchor, or their gradients and next
   *  values (counterparts), off the anchor's boxes `ref`: Tofu's "a tensor with its gradient" tie, which makes a
   *  backward op follow its forward op even where no edge inside the group says how. */
  int64_t mismatch(OpId o, int c, const std::map<TensorId, std::vector<Box>> &ref) {
    const Op &op = g_.op(o);
    auto ref_of = [&](TensorId t) -> const std::vector<Box> * {
      auto it = ref.find(t);
      if (it == ref.end() && counterpart_[static_cast<size_t>(t)] != kNoTensor)
        it = ref.find(counterpart_[static_cast<size_t>(t)]);
      return it == ref.end() ? nullptr : &it->second;
    };
    int64_t bytes = 0;
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      const std::vector<Box> *r = t == kNoTensor ? nullptr : ref_of(t);
      if (!r) continue;
      for (int64_t i = 0; i < m_.factor(); ++i) {
        const std::optional<Box> &b = m_.need(o, c, i)[s];
        if (b) bytes += (box_volume(*b) - box_overlap(*b, (*r)[static_cast<size_t>(i)])) * dtype_size(g_.tensor(t).dtype);
      }
    }
    for (TensorId t : op.outputs) {
      const std::vector<Box> *r = t == kNoTensor ? nullptr : ref_of(t);
      if (!r) continue;
      for (int64_t i = 0; i < m_.factor(); ++i) {
        const Box &b = m_.own(t, c, i);
        bytes += (box_volume(b) - box_overlap(b, (*r)[static_cast<size_t>(i)])) * dtype_size(g_.tensor(t).dtype);
      }
    }
    return bytes;
  }

  /** The anchor's boxes (reads of its inputs, shards of its outputs) under choice `a`. */
  std::map<TensorId, std::vector<Box>> anchor_boxes(OpId o, int a) {
    std::map<TensorId, std::vector<Box>> ref;
    const Op &op = g_.op(o);
    for (size_t s = 0; s < op.inputs.size(); ++s) {
      TensorId t = op.inputs[s];
      if (t == kNoTensor) continue;
      std::vector<Box> boxes;
      for (int64_t i = 0; i < m_.factor(); ++i) {
        const std::optional<Box> &b = m_.need(o, a, i)[s];
        if (!b) break;
        boxes.push_back(*b);
      }
      if (static_cast<int64_t>(boxes.size()) == m_.factor()) ref.emplace(t, std::move(boxes));
    }
    for (TensorId t : op.outputs) {
      if (t == kNoTensor) continue;
      std::vector<Box> boxes;
      for (int64_t i = 0; i < m_.factor(); ++i) boxes.push_back(m_.own(t, a, i));
      ref[t] = std::move(boxes);
    }
    return ref;
  }

  void enumerate_choices(int gi) {
    const std::vector<OpId> &g = groups_[static_cast<size_t>(gi)];
    std::vector<std::vector<int>> options;
    int64_t combos = 1;
    for (size_t k = 1; k < g.size(); ++k) {
      options.push_back(tofu_choices(m_, g[k], replicable_));
      combos = std::min<int64_t>(combos * static_cast<int64_t>(options.back().size()), kBruteForce + 1);
    }
    std::vector<std::vector<int>> &out = choices_.emplace_back();
    std::vector<int64_t> &costs = internal_.emplace_back();
    for (int anchor : tofu_choices(m_, g[0], replicable_)) {
      std::vector<int> pick(g.size(), 0);
      pick[0] = anchor;
      std::map<TensorId, std::vector<Box>> ref = anchor_boxes(g[0], anchor);
      // Members are chosen by internal cost plus their mismatch with the anchor; the group's cost is the former.
      std::map<std::pair<size_t, int>, int64_t> off;
      auto tie = [&](size_t k, int c) {
        auto [it, fresh] = off.emplace(std::make_pair(k, c), 0);
        if (fresh) it->second = mismatch(g[k], c, ref);
        return it->second;
      };
      if (combos <= kBruteForce) {
        // Every combination of the other members; the first cheapest wins.
        std::vector<size_t> at(options.size(), 0);
        std::vector<int> best;
        int64_t best_cost = 0;
        while (true) {
          int64_t cost = 0;
          for (size_t k = 0; k < options.size(); ++k) {
            pick[k + 1] = options[k][at[k]];
            cost += tie(k + 1, pick[k + 1]);
          }
          cost += internal_cost(gi, pick, g.size() - 1);
          if (best.empty() || cost < best_cost) {
            best = pick;
            best_cost = cost;
          }
          size_t k = 0;
          while (k < at.size() && ++at[k] == options[k].size()) at[k++] = 0;
          if (k == at.size()) break;
        }
        pick = best;
      } else {
        for (size_t k = 1; k < g.size(); ++k) {
          int64_t best_cost = -1;
          int best = options[k - 1][0];
          for (int c : options[k - 1]) {
            pick[k] = c;
            int64_t cost = internal_cost(gi, pick, k) + tie(k, c);
            if (best_cost < 0 || cost < best_cost) {
              best_cost = cost;
              best = c;
            }
          }
          pick[k] = best;
        }
      }
      if (std::find(out.begin(), out.end(), pick) != out.end()) continue;
      costs.push_back(internal_cost(gi, pick, g.size() - 1));
      out.push_back(std::move(pick));
    }
  }

  const Graph &g_;
  StepModel &m_;
  const std::vector<std::vector<OpId>> &groups_;
  const std::vector<TensorId> &counterpart_;
  const std::vector<char> &replicable_;
  std::vector<int> group_of_;
  std::vector<std::vector<std::vector<int>>> choices_;
  std::vector<std::vector<int64_t>> internal_;
  std::map<std::pair<int, int>, std::vector<int>> between_;
  std::map<std::tuple<int, int, int, int>, int64_t> cross_;
};

struct State {
  std::vector<int> key;  // choices of the frontier groups, in group order
  int64_t cost = 0;
  int parent = -1;
  int choice = -1;
};

/** The frontier DP: the cheapest group choice per group (tofu.h). */
std::vector<int> solve(GroupProblem &p) {
  int n = static_cast<int>(p.num_groups());
  std::vector<std::vector<int>> earlier(static_cast<size_t>(n));  // neighbours j < i
  std::vector<int> last(static_cast<size_t>(n), -1);               // the latest neighbour
  for (const auto &[ab, edges] : p.between()) {
    earlier[static_cast<size_t>(ab.second)].push_back(ab.first);
    last[static_cast<size_t>(ab.first)] = std::max(last[static_cast<size_t>(ab.first)], ab.second);
  }
  std::vector<std::vector<State>> layers;
  std::vector<int> frontier;  // group ids, ascending
  layers.push_back({State{}});
  for (int i = 0; i < n; ++i) {
    std::vector<int> next;
    for (int j : frontier)
      if (last[static_cast<size_t>(j)] > i) next.push_back(j);
    if (last[static_cast<size_t>(i)] > i) next.push_back(i);
    std::map<std::vector<int>, int> index;
    std::vector<State> out;
    const std::vector<State> &prev = layers.back();
    for (int s = 0; s < static_cast<int>(prev.size()); ++s) {
      const State &st = prev[static_cast<size_t>(s)];
      for (int c = 0; c < static_cast<int>(p.num_choices(i)); ++c) {
        int64_t cost = st.cost + p.internal(i, c);
        for (int j : earlier[static_cast<size_t>(i)]) {
          size_t pos = static_cast<size_t>(std::lower_bound(frontier.begin(), frontier.end(), j) - frontier.begin());
          cost += p.cross(j, i, st.key[pos], c);
        }
        std::vector<int> key;
        for (int j : next)
          key.push_back(j == i ? c
                               : st.key[static_cast<size_t>(std::lower_bound(frontier.begin(), frontier.end(), j) -
                                                            frontier.begin())]);
        auto [it, fresh] = index.emplace(key, static_cast<int>(out.size()));
        if (fresh) out.push_back({std::move(key), cost, s, c});
        else if (State &have = out[static_cast<size_t>(it->second)]; cost < have.cost) have = {it->first, cost, s, c};
      }
    }
    if (out.size() > kMaxStates) {
      std::stable_sort(out.begin(), out.end(), [](const State &a, const State &b) {
        return a.cost != b.cost ? a.cost < b.cost : a.key < b.key;
      });
      out.resize(kMaxStates);
    }
    layers.push_back(std::move(out));
    frontier = std::move(next);
  }
  // The last layer has an empty frontier: one state.
  std::vector<int> pick(static_cast<size_t>(n));
  const std::vector<State> &end = layers.back();
  int s = static_cast<int>(std::min_element(end.begin(), end.end(), [](const State &a, const State &b) {
                             return a.cost < b.cost;
                           }) - end.begin());
  for (int i = n; i-- > 0;) {
    const State &st = layers[static_cast<size_t>(i) + 1][static_cast<size_t>(s)];
    pick[static_cast<size_t>(i)] = st.choice;
    s = st.parent;
  }
  return pick;
}

/** Coordinate descent on single ops after the DP: a group's members were chosen with a heuristic tie to their
 *  anchor, and the DP sees reuse of a fetched box only among the edges of one group or one pair of groups, so an op
 *  may still lower the step's true cost by changing alone. The step's cost is the ops' unary() plus, per tensor, the
 *  reads of all its edges with reuse (StepModel::Reads); an op's change alters its own unary and the reads of the
 *  tensors it owns or reads, so those are what it is weighed by. Sweeps in op order until nothing improves (at most
 *  kSweeps); strictly decreasing, so deterministic and terminating. */
void refine(StepModel &m, std::vector<int> &choice, const std::vector<char> &replicable) {
  constexpr int kSweeps = 8;
  std::map<TensorId, std::vector<int>> edges_of_tensor;
  for (int e = 0; e < static_cast<int>(m.edges().size()); ++e)
    edges_of_tensor[m.edges()[static_cast<size_t>(e)].tensor].push_back(e);
  auto reads = [&](TensorId t) {
    StepModel::Reads r(m);
    int64_t cost = 0;
    for (int e : edges_of_tensor.at(t)) {
      const StepModel::Edge &edge = m.edges()[static_cast<size_t>(e)];
      cost += r.add(e, choice[static_cast<size_t>(edge.owner)], choice[static_cast<size_t>(edge.consumer)]);
    }
    return cost;
  };
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    bool changed = false;
    for (OpId o = 0; o < static_cast<OpId>(choice.size()); ++o) {
      std::vector<TensorId> touched;
      for (int e : m.edges_of(o)) touched.push_back(m.edges()[static_cast<size_t>(e)].tensor);
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      int &have = choice[static_cast<size_t>(o)];
      auto local = [&](int c) {
        have = c;
        int64_t cost = m.unary(o, c);
        for (TensorId t : touched) cost += reads(t);
        return cost;
      };
      int keep = have;
      int64_t best = local(keep);
      for (int c : tofu_choices(m, o, replicable)) {
        int64_t cost = local(c);
        if (cost < best) {
          best = cost;
          keep = c;
          changed = true;
        }
      }
      have = keep;
    }
    if (!changed) break;
  }
}

}  // namespace

std::vector<std::vector<OpId>> coarsen(const Graph &g) {
  UnionFind uf(g.num_ops());
  std::vector<std::vector<Description>> descs;
  for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    if (op.group != kNoOp) uf.unite(o, op.group);
    // A chain of elementwise ops of one shape: each with the producer of its first input when it is the only reader.
    if (is_elementwise(g, op, descs[static_cast<size_t>(o)])) {
      TensorId t = op.inputs[0];
      OpId p = t == kNoTensor ? kNoOp : g.tensor(t).producer;
      if (p != kNoOp && is_elementwise(g, g.op(p), descs[static_cast<size_t>(p)]) && g.consumers(t).size() == 1)
        uf.unite(o, p);
    }
  }
  // A param (or optimizer state) with its update: the op producing its next value joins its first reader.
  for (const Assign &a : g.assigns) {
    OpId u = g.tensor(a.src).producer;
    std::vector<OpId> readers = g.consumers(a.dst);
    if (u != kNoOp && !readers.empty()) uf.unite(u, readers.front());
  }
  // Unrolled timesteps: the k-th op of every step of one scope.
  std::map<std::pair<std::string, int64_t>, int> position;  // (scope, step) -> ops seen
  std::map<std::pair<std::string, int>, OpId> first;         // (scope, position) -> op of the first step
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    if (op.unroll_scope.empty()) continue;
    int k = position[{op.unroll_scope, op.unroll_step}]++;
    auto [it, fresh] = first.emplace(std::make_pair(op.unroll_scope, k), o);
    if (!fresh && g.op(it->second).kind == op.kind) uf.unite(o, it->second);
  }
  std::map<int, std::vector<OpId>> by_root;
  for (OpId o = 0; o < g.num_ops(); ++o) by_root[uf.find(o)].push_back(o);
  std::vector<std::vector<OpId>> groups;
  for (auto &[root, ops] : by_root) groups.push_back(std::move(ops));
  return groups;  // roots are each group's smallest op id, so map order is op order
}

namespace {

/** The recursion over `factors` (one StepModel per factor > 1). */
PartialPlan recurse(const Graph &g, const std::vector<std::vector<Description>> &descs,
                    const std::vector<std::vector<OpId>> &groups, const std::vector<TensorId> &counterpart,
                    const std::vector<int64_t> &factors, bool reduction_splits,
                    const std::vector<char> &replicable) {
  PartialPlan pp = start_partial(g);
  for (int64_t f : factors) {
    if (f == 1) continue;
    StepModel m(g, descs, pp, f, reduction_splits);
    GroupProblem problem(g, m, groups, counterpart, replicable);
    std::vector<int> pick = solve(problem);
    std::vector<int> ops = problem.op_choices(pick, g.num_ops());
    refine(m, ops, replicable);
    m.commit(ops, pp);
  }
  return pp;
}

/** Recursion over the used levels of a topology in `order` (level indices): the factors, and the device at each
 *  row-major position of their mesh, so that each axis's groups lie inside its level (topology.h numbers devices
 *  innermost level first). */
struct LevelOrder {
  std::vector<int64_t> factors;
  std::vector<int> devices;
};

LevelOrder level_order(const std::vector<int> &used, const std::vector<int> &order) {
  LevelOrder r;
  std::vector<int64_t> stride;  // per axis: the device-id distance between neighbours on it
  std::vector<int64_t> level_stride(used.size(), 1);
  for (size_t k = 1; k < used.size(); ++k) level_stride[k] = level_stride[k - 1] * used[k - 1];
  for (int level : order) {
    std::vector<int64_t> f = default_factors(used[static_cast<size_t>(level)]);
    // Within a level the first factor is the most significant digit of the device's coordinate there.
    int64_t inner = level_stride[static_cast<size_t>(level)];
    std::vector<int64_t> s(f.size());
    for (size_t i = f.size(); i-- > 0;) {
      s[i] = inner;
      inner *= f[i];
    }
    r.factors.insert(r.factors.end(), f.begin(), f.end());
    stride.insert(stride.end(), s.begin(), s.end());
  }
  int64_t n = 1;
  for (int64_t f : r.factors) n *= f;
  for (int64_t pos = 0; pos < n; ++pos) {
    int64_t rem = pos, device = 0;
    for (size_t a = r.factors.size(); a-- > 0;) {
      device += (rem % r.factors[a]) * stride[a];
      rem /= r.factors[a];
    }
    r.devices.push_back(static_cast<int>(device));
  }
  return r;
}

/** Per op, whether tofu may leave it unsplit: the update ops whose state (new param, optimizer state) fits, replicated,
 *  in the slack of Tofu's memory target. Tofu partitions every op, so each device holds 1/k of every param; data
 *  parallelism's replicated updates instead trade memory for communication (no gather of sharded params, one
 *  all-reduce of each gradient), which pays on models whose state is small beside their activations. The slack is
 *  kMemorySlack of the 1-device peak (cost_model.h) over the devices; update ops are admitted smallest state first
 *  (ties: op order) while the extra bytes a device then holds, (k-1)/k of each admitted op's outputs, stay within it.
 *  Replicating more could still lower communication, but not within that memory bound. */
std::vector<char> replicated_updates(const Graph &g, int devices) {
  constexpr double kMemorySlack = 0.15;
  std::vector<char> ok(static_cast<size_t>(g.num_ops()), 0);
  if (devices < 2) return ok;
  // Memory does not depend on the links: any topology prices it.
  int64_t peak = estimate_cost(g, single_plan(g, 1), preset_topology("k80x8")).peak_memory_bytes;
  double budget = kMemorySlack * static_cast<double>(peak) / devices, used = 0;
  std::vector<std::pair<int64_t, OpId>> updates;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    if (op.phase != Phase::update) continue;
    int64_t bytes = 0;
    for (TensorId t : op.outputs)
      if (t != kNoTensor) bytes += num_elements(g.tensor(t).shape) * dtype_size(g.tensor(t).dtype);
    updates.push_back({bytes, o});
  }
  std::sort(updates.begin(), updates.end());
  for (const auto &[bytes, o] : updates) {
    used += static_cast<double>(bytes) * (devices - 1) / devices;
    if (used > budget) break;
    ok[static_cast<size_t>(o)] = 1;
  }
  return ok;
}

double comm_seconds(const Graph &g, const Plan &p, const Topology &t) {
  double worst = 0;
  for (const DeviceCost &d : estimate_cost(g, p, t).devices) worst = std::max(worst, d.comm_seconds);
  return worst;
}

}  // namespace

std::vector<int> hierarchy_levels(const Topology &t, int devices) {
  if (devices < 1 || devices > t.devices()) return {};
  std::vector<int> used;
  int rest = devices;
  for (const Level &l : t.levels) {
    int f = std::gcd(rest, l.count);
    // A level used in part must be the outermost used one: else devices 0..devices-1 fill nodes unevenly.
    if (f < l.count && rest / f > 1) return {};
    used.push_back(f);
    rest /= f;
  }
  return rest == 1 ? used : std::vector<int>{};
}

std::vector<int64_t> hierarchy_factors(const Topology &t, int devices) {
  std::vector<int> used = hierarchy_levels(t, devices);
  if (used.empty()) return default_factors(devices);
  std::vector<int> outermost_first;
  for (int k = static_cast<int>(used.size()); k-- > 0;) outermost_first.push_back(k);
  return level_order(used, outermost_first).factors;
}

Plan tofu_plan(const Graph &g, int devices, const TofuOptions &options) {
  const Topology *topo = options.topology;
  if (topo && devices > topo->devices())
    CLEAVE_USER_ERROR("tofu: ", devices, " devices, but topology ", topo->name, " has ", topo->devices());
  std::vector<int64_t> factors = options.factors;
  if (factors.empty()) factors = topo ? hierarchy_factors(*topo, devices) : default_factors(devices);
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f < 1) CLEAVE_USER_ERROR("tofu: mesh factor ", f, " must be at least 1");
    product *= f;
  }
  if (product != devices) CLEAVE_USER_ERROR("tofu: mesh factors multiply to ", product, ", not ", devices, " devices");
  std::vector<std::vector<Description>> descs;
  for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
  std::vector<std::vector<OpId>> groups = coarsen(g);
  std::vector<TensorId> counterpart = counterparts(g);
  std::vector<char> replicable = replicated_updates(g, devices);
  std::vector<int> used = topo && options.factors.empty() ? hierarchy_levels(*topo, devices) : std::vector<int>{};
  std::vector<int> order;  // the used levels (count > 1), outermost first: Tofu's order
  for (int k = static_cast<int>(used.size()); k-- > 0;)
    if (used[static_cast<size_t>(k)] > 1) order.push_back(k);
  if (order.size() < 2)
    return finish_partial(g, devices,
                          recurse(g, descs, groups, counterpart, factors, options.reduction_splits, replicable));
  // Every order of the levels, Tofu's (descending) first; prev_permutation walks the rest in decreasing order.
  Plan best;
  double best_seconds = 0;
  bool first = true;
  do {
    LevelOrder lo = level_order(used, order);
    Plan p = finish_partial(
        g, devices, recurse(g, descs, groups, counterpart, lo.factors, options.reduction_splits, replicable),
        lo.devices);
    double seconds = comm_seconds(g, p, *topo);
    if (first || seconds < best_seconds) {
      best = std::move(p);
      best_seconds = seconds;
    }
    first = false;
  } while (std::prev_permutation(order.begin(), order.end()));
  return best;
}

}  // namespace cleave::plan
