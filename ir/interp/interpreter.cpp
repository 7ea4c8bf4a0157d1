#include "ir/interp/interpreter.h"

#include <array>
#include <cmath>
#include <utility>

#include "ir/error.h"
#include "ir/float16.h"
#include "ir/interp/kernels.h"
#include "ir/tensor_data.h"

namespace cleave::interp {
namespace {

// Indexed by OpKind; generated from ops.def so a new op kind cannot be forgotten here.
constexpr std::array<Kernel, kNumOpKinds> kKernels = {
#define CLEAVE_OP(name) &kernel_##name,
#include "ir/ops.def"
#undef CLEAVE_OP
};
static_assert(kKernels.size() == static_cast<size_t>(kNumOpKinds), "one kernel per op kind");

/** Stores what a kernel of `dtype` would store: floats round to their precision (f32, f16, bf16; to nearest even),
 *  integers truncate and wrap modulo 2^bits (a uint8 sum wraps mod 256), bool is 0/1. */
void round_to_dtype(Value &v) {
  if (v.dtype == DType::f64) return;
  for (double &x : v.data) x = store_as(v.dtype, x);
}

// A value every step computes afresh: an activation or a gradient that carries no data.
bool recomputed(const Tensor &t) {
  return (t.role == Role::activation || t.role == Role::grad) && t.data.empty() && !t.zero_init;
}

}  // namespace

Value value_of(const Tensor &t) {
  CLEAVE_CHECK(!t.data.empty() || num_elements(t.shape) == 0, "tensor \"", t.name, "\" carries no data");
  Value v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.data = data_as_doubles(t);
  return v;
}

Values initial_values(const Graph &g) {
  Values values(static_cast<size_t>(g.num_tensors()));
  for (TensorId id = 0; id < g.num_tensors(); ++id) {
    const Tensor &t = g.tensor(id);
    // Constants always carry data, even when it is empty because the tensor has no elements.
    if (!t.data.empty() || t.role == Role::constant) {
      values[static_cast<size_t>(id)] = value_of(t);
    } else if (t.zero_init) {
      values[static_cast<size_t>(id)] = Value{t.dtype, t.shape, std::vector<double>(num_elements(t.shape), 0.0)};
    }
  }
  return values;
}

void run_op(const Graph &g, OpId op_id, Values &values, const Context &ctx) {
  const Op &op = g.op(op_id);
  CLEAVE_CHECK(values.size() == static_cast<size_t>(g.num_tensors()), "values have ", values.size(),
               " slots for ", g.num_tensors(), " tensors");
  KernelArgs k{g, op, ctx, {}, {}};
  for (TensorId id : op.inputs) {
    if (id == kNoTensor) {
      k.ins.push_back(nullptr);
      continue;
    }
    const std::optional<Value> &v = values[static_cast<size_t>(id)];
    if (!v)
      CLEAVE_USER_ERROR(k.label(), ": input \"", g.tensor(id).name, "\" has no value (not fed and not computed)");
    k.ins.push_back(&*v);
  }
  // Outputs are built aside and stored only after the kernel succeeds, so an op that reads its own output slot
  // (never in a valid graph) or throws leaves `values` untouched.
  std::vector<Value> results(op.outputs.size());
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    TensorId id = op.outputs[i];
    if (id == kNoTensor) {
      k.outs.push_back(nullptr);
      continue;
    }
    const Tensor &t = g.tensor(id);
    results[i].dtype = t.dtype;
    results[i].shape = t.shape;
    results[i].data.assign(static_cast<size_t>(num_elements(t.shape)), 0.0);
    k.outs.push_back(&results[i]);
  }
  kKernels[static_cast<size_t>(op.kind)](k);
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    if (op.outputs[i] == kNoTensor) continue;
    CLEAVE_CHECK(results[i].data.size() == static_cast<size_t>(num_elements(results[i].shape)), k.label(),
                 ": output ", i, " has ", results[i].data.size(), " values");
    round_to_dtype(results[i]);
    values[static_cast<size_t>(op.outputs[i])] = std::move(results[i]);
  }
}

void run_graph(const Graph &g, Values &values, const Context &ctx) {
  for (OpId id = 0; id < g.num_ops(); ++id) run_op(g, id, values, ctx);
}

void run_ops(const Graph &g, const std::vector<OpId> &ops, Values &values, const Context &ctx,
             const std::function<bool(TensorId)> &keep) {
  // The position in `ops` of each tensor's last reader (or of its producer, for a value nothing in `ops` reads).
  std::vector<size_t> last(static_cast<size_t>(g.num_tensors()), ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    for (const std::vector<TensorId> *ids : {&g.op(ops[i]).inputs, &g.op(ops[i]).outputs})
      for (TensorId t : *ids)
        if (t != kNoTensor) last[static_cast<size_t>(t)] = i;
  for (size_t i = 0; i < ops.size(); ++i) {
    run_op(g, ops[i], values, ctx);
    for (const std::vector<TensorId> *ids : {&g.op(ops[i]).inputs, &g.op(ops[i]).outputs})
      for (TensorId t : *ids)
        if (t != kNoTensor && last[static_cast<size_t>(t)] == i && recomputed(g.tensor(t)) && !keep(t))
          values[static_cast<size_t>(t)].reset();
  }
}

void apply_assigns(const Graph &g, Values &values, const std::function<bool(const Assign &)> &which,
                   const std::function<bool(TensorId)> &keep) {
  // Read every source before writing any destination: assigns are simultaneous (a dst may be another's src).
  // A source computed every step and read by this assign alone is moved, not copied: the
  // trained weights of a large model are then never held twice.
  std::vector<int> reads(static_cast<size_t>(g.num_tensors()), 0);
  for (const Assign &a : g.assigns) ++reads[static_cast<size_t>(which && !which(a) ? a.dst : a.src)];
  auto take = [&](TensorId t) -> std::optional<Value> {
    std::optional<Value> &v = values.at(static_cast<size_t>(t));
    bool movable = recomputed(g.tensor(t)) && reads[static_cast<size_t>(t)] == 1 && !(keep && keep(t));
    return movable ? std::exchange(v, std::nullopt) : v;
  };
  std::vector<std::optional<Value>> staged;
  staged.reserve(g.assigns.size());
  for (const Assign &a : g.assigns) {
    if (which && !which(a)) {
      staged.push_back(take(a.dst));  // left as it is
      continue;
    }
    if (!values.at(static_cast<size_t>(a.src)))
      CLEAVE_USER_ERROR("assign \"", g.tensor(a.dst).name, "\" <- \"", g.tensor(a.src).name,
                        "\": source has no value");
    staged.push_back(take(a.src));
  }
  for (size_t i = 0; i < g.assigns.size(); ++i)
    values.at(static_cast<size_t>(g.assigns[i].dst)) = std::move(staged[i]);
}

}  // namespace cleave::interp
