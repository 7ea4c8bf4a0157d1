#include "ir/describe/batch_dims.h"

namespace cleave::describe {
namespace {

/** The dim of output description `d` that var `name` indexes, or -1. */
int output_dim_of(const Description &d, const std::string &name) {
  int v = d.var(name);
  if (v < 0 || d.vars[static_cast<size_t>(v)].role != VarRole::output) return -1;
  for (size_t k = 0; k < d.output_index.size(); ++k)
    if (d.output_index[k].coef(v) != 0) return static_cast<int>(k);
  return -1;
}

/** The first present output (the one a multi-output op is planned by). */
size_t first_output(const Op &op) {
  for (size_t i = 0; i < op.outputs.size(); ++i)
    if (op.outputs[i] != kNoTensor) return i;
  return 0;
}

/** The var of `ix` that is the outermost factor of a row-major flattening: the term with the largest coefficient c,
 *  the other terms (positive coefficients) spanning less than c; -1 otherwise. `exact` asks for the index to be the
 *  var alone (coefficient 1). */
int outer_var(const Description &d, const Index &ix, bool exact) {
  if (ix.indirect || ix.div != 1 || ix.affine.constant != 0 || ix.affine.terms.empty()) return -1;
  const auto &terms = ix.affine.terms;
  if (exact) return terms.size() == 1 && terms[0].second == 1 ? terms[0].first : -1;
  size_t outer = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    if (terms[t].second <= 0) return -1;
    if (terms[t].second > terms[outer].second) outer = t;
  }
  int64_t span = 0;
  for (size_t t = 0; t < terms.size(); ++t)
    if (t != outer) span += terms[t].second * (d.vars[static_cast<size_t>(terms[t].first)].extent - 1);
  return span < terms[outer].second ? terms[outer].first : -1;
}

}  // namespace

int batch_var(const Op &op, const Description &d, const std::vector<int> &batch) {
  std::vector<const Expr *> reads = accesses(d.body);
  for (const Expr *a : accesses(d.post)) reads.push_back(a);
  // A var indexing a batch dim exactly first; else the outer factor of a flattened batch dim (a Reshape unfolding
  // [B*T, C] into [B, T, C]: a block of B is a block of the rows).
  for (bool exact : {true, false})
    for (const OperandInfo &o : d.operands) {
      int bd = batch[static_cast<size_t>(op.input(static_cast<size_t>(o.slot)))];
      if (bd < 0) continue;
      for (const Expr *a : reads) {
        if (a->slot != o.slot) continue;
        int v = outer_var(d, a->index.at(static_cast<size_t>(bd)), exact);
        if (v >= 0) return v;
      }
    }
  return -1;
}

const std::vector<int> &BatchDims::update(const Graph &g) {
  batch_.resize(static_cast<size_t>(g.num_tensors()), -1);
  for (TensorId t = tensors_seen_; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    if (is_batch_source(tensor)) batch_[static_cast<size_t>(t)] = tensor.sample_axis;
  }
  tensors_seen_ = g.num_tensors();
  for (OpId o = ops_seen_; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    std::vector<Description> descs = describe(g, op);
    const Description &d = descs[first_output(op)];
    int v = batch_var(op, d, batch_);
    if (v < 0) continue;
    const std::string &name = d.vars[static_cast<size_t>(v)].name;
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (op.outputs[k] != kNoTensor) batch_[static_cast<size_t>(op.outputs[k])] = output_dim_of(descs[k], name);
  }
  ops_seen_ = g.num_ops();
  return batch_;
}

std::vector<int> batch_dims(const Graph &g) {
  BatchDims b;
  return b.update(g);
}

}  // namespace cleave::describe
