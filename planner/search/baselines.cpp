// The greedy baselines owt, allrow, spartan and equalchop (baselines.h).
#include "planner/search/baselines.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/search/data_plan.h"
#include "planner/search/tofu_step.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::Expr;
using describe::ExprPtr;
using describe::VarRole;

/** Does any access of `e` to input `slot` index with var `v`? */
bool indexes(const ExprPtr &e, int slot, int v) {
  for (const Expr *a : describe::accesses(e, slot))
    for (const describe::Index &i : a->index)
      if (i.affine.coef(v) != 0) return true;
  return false;
}

/** The var owt splits for a forward op: a fully connected layer's output-feature var (an output var indexing a
 *  param operand), else the batch var (the output var indexing the output's batch dim); "" if neither exists. */
std::string owt_var(const Graph &g, const Op &op, const Description &d, const std::vector<int> &batch) {
  if (op.kind == OpKind::MatMul || op.kind == OpKind::Gemm)
    for (const describe::OperandInfo &o : d.operands) {
      if (g.tensor(op.inputs[static_cast<size_t>(o.slot)]).role != Role::param) continue;
      for (size_t v = 0; v < d.vars.size(); ++v)
        if (d.vars[v].role == VarRole::output && indexes(d.body, o.slot, static_cast<int>(v))) return d.vars[v].name;
    }
  TensorId out = op.outputs[primary_output(op)];
  int bd = batch[static_cast<size_t>(out)];
  if (bd < 0) return "";
  for (size_t v = 0; v < d.vars.size(); ++v)
    if (d.vars[v].role == VarRole::output && d.output_index[static_cast<size_t>(bd)].coef(static_cast<int>(v)) != 0)
      return d.vars[v].name;
  return "";
}

/** Product of the mesh axes op `o` already splits `var` along. */
int64_t splits_so_far(const PartialPlan &pp, OpId o, const std::string &var) {
  int64_t n = 1;
  for (size_t a = 0; a < pp.mesh.size(); ++a)
    if (pp.op_vars[static_cast<size_t>(o)][a] == var) n *= pp.mesh[a];
  return n;
}

int64_t largest_tensor_bytes(const Graph &g, const Op &op) {
  int64_t b = 0;
  for (const std::vector<TensorId> *ts : {&op.inputs, &op.outputs})
    for (TensorId t : *ts)
      if (t != kNoTensor) b = std::max(b, num_elements(g.tensor(t).shape) * dtype_size(g.tensor(t).dtype));
  return b;
}

}  // namespace

Plan baseline_plan(const Graph &g, const std::string &name, int devices) {
  if (name != "owt" && name != "allrow" && name != "spartan" && name != "equalchop")
    CLEAVE_USER_ERROR("unknown baseline planner \"", name, "\"");
  std::vector<std::vector<Description>> descs;
  for (const Op &op : g.ops()) descs.push_back(describe::describe(g, op));
  std::vector<int> batch = batch_dims(g);
  std::vector<OpId> order;
  for (OpId o = 0; o < g.num_ops(); ++o) order.push_back(o);
  if (name == "owt")  // forward ops decide first; the others follow them
    std::stable_partition(order.begin(), order.end(), [&](OpId o) { return g.op(o).phase == Phase::forward; });
  if (name == "spartan")
    std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) {
      return largest_tensor_bytes(g, g.op(a)) > largest_tensor_bytes(g, g.op(b));
    });
  PartialPlan pp = start_partial(g);
  for (int64_t f : default_factors(devices)) {
    StepModel m(g, descs, pp, f, true);
    std::vector<int> choice(static_cast<size_t>(g.num_ops()), -1);
    for (OpId o : order) {
      const Op &op = g.op(o);
      const Description &d = descs[static_cast<size_t>(o)][primary_output(op)];
      std::string preferred = name == "owt" && op.phase == Phase::forward ? owt_var(g, op, d, batch) : "";
      // Lexicographic: (preference rank, bytes moved with the ops decided so far, choice order).
      std::tuple<int64_t, int64_t, int> best{0, 0, -1};
      for (int c : m.partitioning_choices(o)) {
        const std::string &var = m.choices(o)[static_cast<size_t>(c)];
        int v = d.var(var);
        int64_t rank = 0;
        if (name == "owt" && !preferred.empty()) rank = var == preferred ? 0 : 1;
        if (name == "allrow")
          rank = v >= 0 && d.vars[static_cast<size_t>(v)].role == VarRole::output && !d.output_index.empty() &&
                         d.output_index[0].coef(v) != 0
                     ? 0
                     : 1;
        if (name == "equalchop" && v >= 0) rank = -(d.vars[static_cast<size_t>(v)].extent / splits_so_far(pp, o, var));
        std::tuple<int64_t, int64_t, int> cand{rank, m.cost_given(o, c, choice), c};
        if (std::get<2>(best) < 0 || cand < best) best = cand;
      }
      choice[static_cast<size_t>(o)] = std::get<2>(best);
    }
    m.commit(choice, pp);
  }
  return finish_partial(g, devices, pp);
}

}  // namespace cleave::plan
