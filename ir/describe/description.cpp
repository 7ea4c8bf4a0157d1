// The description data model: affine indexes, the expression builder, the Builder and derived queries.
#include "ir/describe/description.h"

#include <algorithm>

#include "ir/error.h"

namespace cleave::describe {
namespace {

Affine normalised(Affine a) {
  std::sort(a.terms.begin(), a.terms.end());
  std::vector<std::pair<int, int64_t>> merged;
  for (const auto &t : a.terms) {
    if (!merged.empty() && merged.back().first == t.first) merged.back().second += t.second;
    else merged.push_back(t);
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const auto &t) { return t.second == 0; }),
               merged.end());
  a.terms = std::move(merged);
  return a;
}

ExprPtr make_call(Fn f, std::vector<E> args, std::string name = {}, int64_t flops = 1) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::call;
  e->fn = f;
  e->name = std::move(name);
  e->flops = flops;
  for (const E &a : args) {
    CLEAVE_CHECK(a.ptr() != nullptr, "empty argument of ", fn_name(f));
    e->args.push_back(a.ptr());
  }
  return e;
}

bool evaluable(const ExprPtr &e) {
  if (!e) return true;
  if (e->kind == Expr::Kind::call && e->fn == Fn::opaque) return false;
  for (const ExprPtr &a : e->args)
    if (!evaluable(a)) return false;
  for (const Index &i : e->index)
    if (!evaluable(i.indirect)) return false;
  return true;
}

int64_t count_ops(const ExprPtr &e) {
  if (!e) return 0;
  int64_t n = 0;
  if (e->kind == Expr::Kind::call) n += e->fn == Fn::opaque ? e->flops : 1;
  for (const ExprPtr &a : e->args) n += count_ops(a);
  return n;
}

}  // namespace

int64_t Affine::coef(int var) const {
  for (const auto &t : terms)
    if (t.first == var) return t.second;
  return 0;
}

Affine operator+(const Affine &a, const Affine &b) {
  Affine r = a;
  r.terms.insert(r.terms.end(), b.terms.begin(), b.terms.end());
  r.constant += b.constant;
  return normalised(std::move(r));
}
Affine operator-(const Affine &a, const Affine &b) { return a + b * -1; }
Affine operator*(const Affine &a, int64_t k) {
  Affine r = a;
  for (auto &t : r.terms) t.second *= k;
  r.constant *= k;
  return normalised(std::move(r));
}
Affine operator*(int64_t k, const Affine &a) { return a * k; }

std::string fn_name(Fn f) {
  switch (f) {
    case Fn::add: return "+";
    case Fn::sub: return "-";
    case Fn::mul: return "*";
    case Fn::div: return "/";
    case Fn::pow: return "pow";
    case Fn::neg: return "neg";
    case Fn::exp: return "exp";
    case Fn::log: return "log";
    case Fn::sqrt: return "sqrt";
    case Fn::erf: return "erf";
    case Fn::relu: return "relu";
    case Fn::sigmoid: return "sigmoid";
    case Fn::tanh: return "tanh";
    case Fn::step: return "step";
    case Fn::abs: return "abs";
    case Fn::floor: return "floor";
    case Fn::ceil: return "ceil";
    case Fn::round: return "round";
    case Fn::sign: return "sign";
    case Fn::round_bf16: return "round_bf16";
    case Fn::round_fp16: return "round_fp16";
    case Fn::sin: return "sin";
    case Fn::cos: return "cos";
    case Fn::tan: return "tan";
    case Fn::asin: return "asin";
    case Fn::acos: return "acos";
    case Fn::atan: return "atan";
    case Fn::sinh: return "sinh";
    case Fn::cosh: return "cosh";
    case Fn::asinh: return "asinh";
    case Fn::acosh: return "acosh";
    case Fn::atanh: return "atanh";
    case Fn::max: return "max";
    case Fn::min: return "min";
    case Fn::eq: return "eq";
    case Fn::where: return "where";
    case Fn::opaque: return "opaque";
  }
  return "?";
}

E::E(double v) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::constant;
  e->value = v;
  p_ = e;
}
E operator+(const E &a, const E &b) { return E(make_call(Fn::add, {a, b})); }
E operator-(const E &a, const E &b) { return E(make_call(Fn::sub, {a, b})); }
E operator*(const E &a, const E &b) { return E(make_call(Fn::mul, {a, b})); }
E operator/(const E &a, const E &b) { return E(make_call(Fn::div, {a, b})); }
E operator-(const E &a) { return E(make_call(Fn::neg, {a})); }
E call(Fn f, std::vector<E> args) {
  CLEAVE_CHECK(f != Fn::opaque, "use opaque() for opaque functions");
  return E(make_call(f, std::move(args)));
}
E opaque(const std::string &name, std::vector<E> args, int64_t flops_per_point) {
  return E(make_call(Fn::opaque, std::move(args), name, flops_per_point));
}
E value_of(const Affine &a) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::var_value;
  e->affine = a;
  return E(e);
}
E step_count() {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::step_count;
  return E(e);
}
E reduced() {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::reduced;
  return E(e);
}

E Operand::operator()(std::vector<Ix> idx, double pad) const {
  CLEAVE_CHECK(idx.size() == shape_.size(), "access to ", name_, " with ", idx.size(), " indexes, rank ",
               shape_.size());
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::access;
  e->slot = slot_;
  e->name = name_;
  e->pad = pad;
  for (Ix &i : idx) e->index.push_back(std::move(i.index));
  return E(e);
}

int Description::var(const std::string &name) const {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].name == name) return static_cast<int>(i);
  return -1;
}

Builder::Builder(const Graph &g, const Op &op, int output_slot, std::string output_name) : g_(g), op_(op) {
  d_.output_name = std::move(output_name);
  d_.output_slot = output_slot;
  TensorId t = op.output(static_cast<size_t>(output_slot));
  CLEAVE_CHECK(t != kNoTensor, "describing absent output ", output_slot, " of ", op.name);
  d_.output_shape = g.tensor(t).shape;
}

Var Builder::out(const std::string &name, int64_t extent, bool opaque) {
  d_.vars.push_back({name, extent, VarRole::output, opaque});
  return Var{static_cast<int>(d_.vars.size()) - 1};
}

Var Builder::sum(const std::string &name, int64_t extent, bool opaque) {
  d_.vars.push_back({name, extent, VarRole::reduction, opaque});
  return Var{static_cast<int>(d_.vars.size()) - 1};
}

Var Builder::synced(Var v) {
  d_.vars.at(static_cast<size_t>(v.id)).synced = true;
  return v;
}

Var Builder::internal(const std::string &name, int64_t extent) {
  d_.vars.push_back({name, extent, VarRole::internal, true});
  return Var{static_cast<int>(d_.vars.size()) - 1};
}

Operand Builder::in(int slot, const std::string &name) {
  TensorId t = op_.input(static_cast<size_t>(slot));
  if (t == kNoTensor)
    CLEAVE_USER_ERROR("op \"", op_.name, "\" (", op_kind_name(op_.kind), "): missing input ", name);
  const Shape &shape = g_.tensor(t).shape;
  auto it = std::find_if(d_.operands.begin(), d_.operands.end(), [&](const OperandInfo &o) { return o.slot == slot; });
  if (it == d_.operands.end()) {
    d_.operands.push_back({slot, name, shape});
    std::sort(d_.operands.begin(), d_.operands.end(),
              [](const OperandInfo &a, const OperandInfo &b) { return a.slot < b.slot; });
  }
  return Operand(slot, name, shape);
}

Description Builder::build(std::vector<Affine> index, Reduce reduce, const E &body, const E &post) && {
  CLEAVE_CHECK(index.size() == d_.output_shape.size(), "output index of ", op_.name, " has ", index.size(),
               " entries for rank ", d_.output_shape.size());
  bool has_reduction = std::any_of(d_.vars.begin(), d_.vars.end(),
                                   [](const LoopVar &v) { return v.role == VarRole::reduction; });
  CLEAVE_CHECK(has_reduction == (reduce != Reduce::none), "reduction vars and reduce kind disagree in ", op_.name);
  for (const Affine &a : index)
    for (const auto &t : a.terms)
      CLEAVE_CHECK(d_.vars[static_cast<size_t>(t.first)].role == VarRole::output, "reduction var in output index");
  d_.output_index = std::move(index);
  d_.reduce = reduce;
  d_.body = body.ptr();
  d_.post = post.ptr();
  return std::move(d_);
}

SplitKind split_kind(const Description &d, int v) {
  const LoopVar &lv = d.vars.at(static_cast<size_t>(v));
  if (lv.synced) return SplitKind::synced;
  if (lv.opaque) return SplitKind::none;
  if (lv.role == VarRole::output) return SplitKind::concat;
  // Only sums combine partial results by addition; a max/argmax/mean reduction is not split.
  return d.reduce == Reduce::sum ? SplitKind::partial : SplitKind::none;
}

std::vector<int> splittable_vars(const Description &d) {
  std::vector<int> out;
  for (size_t i = 0; i < d.vars.size(); ++i)
    if (split_kind(d, static_cast<int>(i)) != SplitKind::none) out.push_back(static_cast<int>(i));
  return out;
}

int64_t flops(const Description &d) {
  int64_t all = 1, outs = 1;
  for (const LoopVar &v : d.vars) {
    all *= v.extent;
    if (v.role == VarRole::output) outs *= v.extent;
  }
  int64_t per_point = count_ops(d.body) + (d.reduce == Reduce::none ? 0 : 1);
  return all * per_point + outs * count_ops(d.post);
}

int64_t op_flops(const Graph &g, const Op &op) {
  int64_t total = 0;
  std::vector<Description> ds = describe(g, op);
  for (size_t i = 0; i < ds.size(); ++i)
    if (op.output(i) != kNoTensor) total += flops(ds[i]);
  return total;
}

bool is_evaluable(const Description &d) { return evaluable(d.body) && evaluable(d.post); }

namespace {
void collect(const ExprPtr &e, int slot, std::vector<const Expr *> &out) {
  if (!e) return;
  if (e->kind == Expr::Kind::access && (slot < 0 || e->slot == slot)) out.push_back(e.get());
  for (const ExprPtr &a : e->args) collect(a, slot, out);
  for (const Index &i : e->index) collect(i.indirect, slot, out);
}
}  // namespace

std::vector<const Expr *> accesses(const ExprPtr &e, int slot) {
  std::vector<const Expr *> out;
  collect(e, slot, out);
  return out;
}

}  // namespace cleave::describe
