// Helpers shared by the per-kind description functions, and the dispatch table.
#include "ir/describe/ops_util.h"

namespace cleave::describe {

const Shape &in_shape(const Graph &g, const Op &op, size_t i) {
  if (op.input(i) == kNoTensor) CLEAVE_USER_ERROR(op_label(op), ": missing input ", i);
  return g.tensor(op.input(i)).shape;
}

Description absent(const Op &op, int slot, const std::string &name) {
  Description d;
  d.output_name = name;
  d.output_slot = slot;
  return d;
}

std::string generic_name(size_t i) {
  static const char *names[] = {"i", "j", "k", "l", "m", "n", "o", "p"};
  return i < 8 ? names[i] : "d" + std::to_string(i);
}

std::vector<Var> out_vars(Builder &b, const Shape &shape, size_t first_name) {
  std::vector<Var> v;
  for (size_t d = 0; d < shape.size(); ++d) v.push_back(b.out(generic_name(first_name + d), shape[d]));
  return v;
}

std::vector<Affine> idx(const std::vector<Var> &vars) { return {vars.begin(), vars.end()}; }
std::vector<Ix> ix(const std::vector<Var> &vars) { return {vars.begin(), vars.end()}; }

std::vector<Ix> bcast_ix(const std::vector<Var> &vars, const Shape &in) {
  std::vector<Ix> r;
  size_t off = vars.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) r.emplace_back(int64_t{0});
    else r.emplace_back(vars[off + d]);
  }
  return r;
}

std::vector<std::string> spatial_names(size_t n) {
  if (n == 1) return {"x"};
  if (n == 2) return {"y", "x"};
  if (n == 3) return {"z", "y", "x"};
  std::vector<std::string> r;
  for (size_t i = 0; i < n; ++i) r.push_back("s" + std::to_string(i));
  return r;
}

E scaled(double k, const E &e) { return k == 1 ? e : E(k) * e; }
E plus_scaled(const E &a, double k, const E &b) { return k == 0 ? a : a + scaled(k, b); }

std::string op_label(const Op &op) { return detail::concat("op \"", op.name, "\" (", op_kind_name(op.kind), ")"); }

namespace {
using DescribeFn = Descs (*)(const Graph &, const Op &);
constexpr DescribeFn kDescribe[] = {
#define CLEAVE_OP(name) &describe_##name,
#include "ir/ops.def"
#undef CLEAVE_OP
};
static_assert(sizeof(kDescribe) / sizeof(kDescribe[0]) == kNumOpKinds, "a description per op kind");
}  // namespace

std::vector<Description> describe(const Graph &g, const Op &op) {
  Descs d = kDescribe[static_cast<size_t>(op.kind)](g, op);
  CLEAVE_CHECK(d.size() >= op.outputs.size(), "description of ", op.name, " covers ", d.size(), " of ",
               op.outputs.size(), " outputs");
  d.resize(op.outputs.size());
  return d;
}

}  // namespace cleave::describe
