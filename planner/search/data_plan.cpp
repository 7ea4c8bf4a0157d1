// The `single` and `data` planners, and the batch dims every data-parallel split follows (DESIGN §5).
#include "planner/search/data_plan.h"

#include "ir/describe/batch_dims.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/plan/validate.h"
#include "planner/search/strategies.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::is_batch_source;

std::vector<int> iota(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

/** Plans every op with `choose(op, descs)` and every source with `source(tensor id)`; produced tensors get the
 *  shardings their producers imply. */
template <typename ChooseOp, typename ChooseSource>
Plan assemble(const Graph &g, int devices, const ChooseOp &choose, const ChooseSource &source) {
  Plan p;
  p.devices = devices;
  std::vector<Sharding> shardings(static_cast<size_t>(g.num_tensors()));
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).producer == kNoOp) shardings[static_cast<size_t>(t)] = source(t);
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    std::vector<Description> descs = describe::describe(g, op);
    ParallelConfig c = choose(op, descs);
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (op.outputs[k] != kNoTensor) shardings[static_cast<size_t>(op.outputs[k])] = implied_sharding(op, descs, c, k);
    p.ops.push_back({op.name, std::move(c)});
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t) p.tensors.push_back({g.tensor(t).name, shardings[static_cast<size_t>(t)]});
  return p;
}

}  // namespace

Plan single_plan(const Graph &g, int devices) {
  Sharding rep{{0}, {1}, {AxisSharding{}}};
  return assemble(
      g, devices, [](const Op &, const std::vector<Description> &) { return ParallelConfig{{0}, {1}, {""}}; },
      [&](TensorId) { return rep; });
}

Plan data_plan(const Graph &g, int devices) {
  for (const Tensor &t : g.tensors())
    if (is_batch_source(t) && t.shape[static_cast<size_t>(t.sample_axis)] % devices != 0)
      CLEAVE_USER_ERROR("data planner: batch ", t.shape[static_cast<size_t>(t.sample_axis)], " of ", role_name(t.role),
                        " \"", t.name, "\"", t.sample_axis ? " (dim " + std::to_string(t.sample_axis) + ")" : "",
                        " is not divisible by ", devices, " devices");
  std::vector<int> batch = batch_dims(g);
  std::vector<int> all = iota(devices);
  const std::vector<int64_t> mesh{devices};
  auto choose = [&](const Op &op, const std::vector<Description> &descs) {
    ParallelConfig c{all, mesh, {""}};
    // The optimizer runs replicated, as the parameters and their state are: a gradient left split by the batch (a
    // parameter whose dim pairs with the samples', as torch.bmm's second operand [B, K, N]) is gathered to be read,
    // and the updated value is whole where its assign stores it.
    if (op.phase == Phase::update) return c;
    const Description &d = descs[primary_output(op)];
    int v = batch_var(op, d, batch);
    if (v < 0) return c;
    ParallelConfig split{all, mesh, {d.vars[static_cast<size_t>(v)].name}};
    // Synced batch vars (BatchNorm, weighted-mean losses) split like any other, their kernels all-reducing the
    // statistics; opaque or max-reduced ones, splits the outputs' shardings cannot state, and splits codegen cannot
    // lower (codegen_supports, as every planner checks) stay replicated.
    return config_problems(g, op, descs, split, devices).empty() && codegen_supports(g, op, descs, split) ? split : c;
  };
  auto source = [&](TensorId t) {
    Sharding s{all, mesh, {AxisSharding{}}};
    if (is_batch_source(g.tensor(t))) s.axes[0] = {AxisSharding::Kind::split, g.tensor(t).sample_axis};
    return s;
  };
  return assemble(g, devices, choose, source);
}

}  // namespace cleave::plan
