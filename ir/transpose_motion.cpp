#include "ir/transpose_motion.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cleave {
namespace {

/** The perm of a Transpose that keeps the last axis last, else empty. */
std::vector<int64_t> row_perm(const Op &op) {
  if (op.kind != OpKind::Transpose) return {};
  std::vector<int64_t> perm = op.attr_ints("perm", {});
  if (perm.size() < 2 || perm.back() != static_cast<int64_t>(perm.size()) - 1) return {};
  return perm;
}

bool is_copy(OpKind k) {
  switch (k) {
    case OpKind::Reshape: case OpKind::Transpose: case OpKind::Slice: case OpKind::Concat:
      return true;
    default:
      return false;
  }
}

/** Whether `op` computes each row of its one result from the same row of `row` (and operands without rows), so that
 *  transposing the rows of `row` transposes those of the result. */
bool row_wise(const Graph &g, const Op &op, TensorId row) {
  if (op.outputs.size() != 1 || op.output(0) == kNoTensor) return false;
  const Shape &rs = g.tensor(row).shape, &ys = g.tensor(op.output(0)).shape;
  if (rs.size() < 2 || ys.size() != rs.size()) return false;
  switch (op.kind) {
    case OpKind::MatMul:
      return op.inputs.size() == 2 && op.input(0) == row && op.input(1) != row && op.attr_int("transA", 0) == 0 &&
             g.tensor(op.input(1)).shape.size() == 2;
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: {
      if (op.inputs.size() != 2 || ys != rs || op.input(0) == op.input(1)) return false;
      TensorId other = op.input(0) == row ? op.input(1) : op.input(1) == row ? op.input(0) : kNoTensor;
      if (other == kNoTensor) return false;
      const Shape &os = g.tensor(other).shape;
      for (size_t i = 0; i + 1 < os.size(); ++i)
        if (os[i] != 1) return false;
      return os.size() <= rs.size();
    }
    case OpKind::Relu: case OpKind::Gelu: case OpKind::Sigmoid: case OpKind::Tanh: case OpKind::Erf:
    case OpKind::Neg:
      return op.inputs.size() == 1 && op.input(0) == row;
    default:
      return false;
  }
}

/** The operand whose rows make `op`'s result's rows (row_wise), or kNoTensor. */
TensorId row_operand(const Graph &g, const Op &op) {
  for (TensorId in : op.inputs)
    if (in != kNoTensor && row_wise(g, op, in)) return in;
  return kNoTensor;
}

/** The shape Transpose(perm) makes of `x`, and the shape it makes `y` of. */
Shape permuted(const Shape &x, const std::vector<int64_t> &perm) {
  Shape y(x.size());
  for (size_t i = 0; i < perm.size(); ++i) y[i] = x[static_cast<size_t>(perm[i])];
  return y;
}
Shape unpermuted(const Shape &y, const std::vector<int64_t> &perm) {
  Shape x(y.size());
  for (size_t i = 0; i < perm.size(); ++i) x[static_cast<size_t>(perm[i])] = y[i];
  return x;
}

/** One transpose to move, and the ops it moves past. */
struct Motion {
  OpId transpose = kNoOp;
  std::vector<int64_t> perm;
  bool down = false;
  std::vector<OpId> chain;   // the row-wise ops, in graph order
  std::vector<OpId> slices;  // down: the Slices of the chain's last result
  TensorId top = kNoTensor;  // up: the copy's result the chain starts at
};

std::vector<Motion> plan_motions(const Graph &g) {
  const std::vector<std::vector<OpId>> readers = g.all_consumers();
  std::vector<bool> fixed(static_cast<size_t>(g.num_tensors()), false), claimed(static_cast<size_t>(g.num_ops()));
  for (TensorId t : g.outputs) fixed[static_cast<size_t>(t)] = true;
  if (g.loss != kNoTensor) fixed[static_cast<size_t>(g.loss)] = true;
  auto sole_reader = [&](TensorId t) {
    const std::vector<OpId> &r = readers[static_cast<size_t>(t)];
    return !fixed[static_cast<size_t>(t)] && r.size() == 1 ? r[0] : kNoOp;
  };
  auto free_op = [&](OpId id) { return id != kNoOp && !claimed[static_cast<size_t>(id)]; };
  std::vector<Motion> motions;
  for (OpId id = 0; id < g.num_ops(); ++id) {
    const Op &t = g.op(id);
    Motion m;
    m.transpose = id;
    m.perm = row_perm(t);
    if (m.perm.empty() || !free_op(id) || t.inputs.size() != 1 || t.outputs.size() != 1 ||
        g.tensor(t.input(0)).shape.size() != m.perm.size())
      continue;
    // Down, to Slices.
    TensorId cur = t.output(0);
    for (OpId r = sole_reader(cur); free_op(r) && row_wise(g, g.op(r), cur); r = sole_reader(cur)) {
      m.chain.push_back(r);
      cur = g.op(r).output(0);
    }
    const std::vector<OpId> &ends = readers[static_cast<size_t>(cur)];
    bool to_slices = !fixed[static_cast<size_t>(cur)] && !ends.empty() &&
                     std::all_of(ends.begin(), ends.end(), [&](OpId s) {
                       const Op &op = g.op(s);
                       return free_op(s) && op.kind == OpKind::Slice && op.inputs.size() == 1 && op.input(0) == cur;
                     });
    if (to_slices) {
      m.down = true;
      m.slices = ends;
    } else {
      // Up, to a copy.
      m.chain.clear();
      cur = t.input(0);
      if (sole_reader(cur) != id) continue;
      for (OpId p = g.tensor(cur).producer; free_op(p); p = g.tensor(cur).producer) {
        TensorId row = row_operand(g, g.op(p));
        if (row == kNoTensor || sole_reader(row) != p) break;
        m.chain.push_back(p);
        cur = row;
      }
      OpId copy = g.tensor(cur).producer;
      if (m.chain.empty() || !free_op(copy) || !is_copy(g.op(copy).kind)) continue;
      std::reverse(m.chain.begin(), m.chain.end());
      m.top = cur;
    }
    claimed[static_cast<size_t>(id)] = true;
    for (OpId c : m.chain) claimed[static_cast<size_t>(c)] = true;
    for (OpId s : m.slices) claimed[static_cast<size_t>(s)] = true;
    motions.push_back(std::move(m));
  }
  return motions;
}

}  // namespace

int move_transposes(Graph &g) {
  const std::vector<Motion> motions = plan_motions(g);
  if (motions.empty()) return 0;
  std::vector<Tensor> tensors = g.tensors();
  std::set<std::string> taken_tensors, taken_ops;
  for (const Tensor &t : tensors) taken_tensors.insert(t.name);
  for (const Op &op : g.ops()) taken_ops.insert(op.name);
  auto fresh = [](std::set<std::string> &taken, const std::string &base) {
    std::string name = base;
    for (int k = 1; taken.count(name); ++k) name = base + "." + std::to_string(k);
    taken.insert(name);
    return name;
  };
  for (const Motion &m : motions) taken_ops.erase(g.op(m.transpose).name);  // a moved transpose keeps its name
  std::vector<Op> ops = g.ops();  // edited in place; the moved transposes are dropped
  std::vector<bool> dropped(ops.size(), false);
  std::map<OpId, std::vector<Op>> before, after;  // new transposes, emitted around an op
  for (const Motion &m : motions) {
    const Op &t = g.op(m.transpose);
    const TensorId x = t.input(0), y = t.output(0);
    dropped[static_cast<size_t>(m.transpose)] = true;
    Op moved = t;  // kind, perm, phase and unroll tags; name and operands set below
    moved.group = kNoOp;
    if (m.down) {
      // The chain computes rows in x's order; each Slice cuts the same box out of them, then transposes it.
      for (OpId c : m.chain) {
        TensorId o = ops[static_cast<size_t>(c)].outputs[0];
        tensors[static_cast<size_t>(o)].shape = unpermuted(tensors[static_cast<size_t>(o)].shape, m.perm);
      }
      if (!m.chain.empty())
        std::replace(ops[static_cast<size_t>(m.chain[0])].inputs.begin(),
                     ops[static_cast<size_t>(m.chain[0])].inputs.end(), y, x);
      const TensorId rows = m.chain.empty() ? x : g.op(m.chain.back()).output(0);
      for (size_t j = 0; j < m.slices.size(); ++j) {
        Op &s = ops[static_cast<size_t>(m.slices[j])];
        const TensorId result = s.outputs[0];
        const int64_t rank = static_cast<int64_t>(m.perm.size());
        std::vector<int64_t> starts = s.attr_ints("starts"), axes = s.attr_ints("axes", {});
        if (axes.empty())
          for (size_t a = 0; a < starts.size(); ++a) axes.push_back(static_cast<int64_t>(a));
        for (int64_t &a : axes) a = m.perm[static_cast<size_t>(a < 0 ? a + rank : a)];
        s.attrs["axes"] = axes;
        s.inputs = {rows};
        // The Slice's result in x's order: the transpose's old result for the first, new tensors for the others.
        Tensor cut = tensors[static_cast<size_t>(result)];
        cut.name = fresh(taken_tensors, cut.name + ".rows");
        cut.shape = unpermuted(cut.shape, m.perm);
        TensorId at = y;
        if (j == 0) {
          tensors[static_cast<size_t>(y)] = cut;
        } else {
          at = static_cast<TensorId>(tensors.size());
          tensors.push_back(cut);
        }
        s.outputs = {at};
        Op tr = moved;
        tr.name = fresh(taken_ops, t.name);
        tr.inputs = {at};
        tr.outputs = {result};
        after[m.slices[j]].push_back(std::move(tr));
      }
    } else {
      // A transpose of the copy's result, then the chain on transposed rows; its last op gives the old result.
      Tensor top = tensors[static_cast<size_t>(m.top)];
      top.name = fresh(taken_tensors, top.name + ".t");
      top.shape = permuted(top.shape, m.perm);
      tensors[static_cast<size_t>(x)] = top;  // x's id, free now (the chain gives y), holds the transposed rows
      Op &first = ops[static_cast<size_t>(m.chain[0])];
      std::replace(first.inputs.begin(), first.inputs.end(), m.top, x);
      for (OpId c : m.chain) {
        TensorId &o = ops[static_cast<size_t>(c)].outputs[0];
        if (c == m.chain.back()) o = y;
        else tensors[static_cast<size_t>(o)].shape = permuted(tensors[static_cast<size_t>(o)].shape, m.perm);
      }
      Op tr = moved;
      tr.name = fresh(taken_ops, t.name);
      tr.inputs = {m.top};
      tr.outputs = {x};
      before[m.chain[0]].push_back(std::move(tr));
    }
  }
  Graph out;
  out.name = g.name;
  out.outputs = g.outputs;
  out.loss = g.loss;
  out.assigns = g.assigns;
  out.loss_scaling = g.loss_scaling;
  for (Tensor t : tensors) {
    t.producer = kNoOp;
    out.add_tensor(std::move(t));
  }
  std::vector<OpId> new_id(ops.size(), kNoOp);
  for (size_t id = 0; id < ops.size(); ++id) {
    if (dropped[id]) continue;
    for (Op &tr : before[static_cast<OpId>(id)]) out.add_op(std::move(tr));
    Op op = std::move(ops[id]);
    if (op.group != kNoOp)
      op.group = op.group == static_cast<OpId>(id) || dropped[static_cast<size_t>(op.group)]
                     ? kNoOp
                     : new_id[static_cast<size_t>(op.group)];
    new_id[id] = out.add_op(std::move(op));
    for (Op &tr : after[static_cast<OpId>(id)]) out.add_op(std::move(tr));
  }
  g = std::move(out);
  return static_cast<int>(motions.size());
}

}  // namespace cleave
