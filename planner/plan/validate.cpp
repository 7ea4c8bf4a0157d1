// The plan validator: every rule of plan.h, with one line per problem naming the tensor or op.
#include "planner/plan/validate.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/error.h"
#include "ir/printer.h"
#include "planner/plan/region.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::Expr;
using describe::ExprPtr;
using describe::Fn;
using describe::SplitKind;
using describe::VarRole;

std::string quoted(const std::string &s) { return quote_excerpt(s, 200); }  // a garbage name is not echoed whole

template <typename T>
std::string list_str(const std::vector<T> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

bool mentions_reduced(const ExprPtr &e) {
  if (!e) return false;
  if (e->kind == Expr::Kind::reduced) return true;
  for (const ExprPtr &a : e->args)
    if (mentions_reduced(a)) return true;
  return false;
}

/** f(reduced) with f(x + y) = f(x) + f(y): sums of partial results then give the result. */
bool linear_in_reduced(const ExprPtr &e) {
  if (e->kind == Expr::Kind::reduced) return true;
  if (e->kind != Expr::Kind::call) return false;
  const auto &a = e->args;
  switch (e->fn) {
    case Fn::add:
    case Fn::sub: return linear_in_reduced(a[0]) && linear_in_reduced(a[1]);
    case Fn::neg: return linear_in_reduced(a[0]);
    case Fn::mul:
      return (linear_in_reduced(a[0]) && !mentions_reduced(a[1])) ||
             (!mentions_reduced(a[0]) && linear_in_reduced(a[1]));
    case Fn::div: return linear_in_reduced(a[0]) && !mentions_reduced(a[1]);
    default: return false;
  }
}

/** Problems of a device group and mesh, prefixed by `what`. */
void group_problems(const std::string &what, const std::vector<int> &devices, const std::vector<int64_t> &mesh,
                    int num_devices, std::vector<std::string> &out) {
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0 || d >= num_devices)
      out.push_back(what + ": device " + std::to_string(d) + " out of range (the plan has " +
                    std::to_string(num_devices) + " devices)");
    else if (!seen.insert(d).second)
      out.push_back(what + ": duplicate device " + std::to_string(d) + " in group " + list_str(devices));
  }
  if (devices.empty()) out.push_back(what + ": empty device group");
  int64_t product = 1;
  for (int64_t m : mesh) {
    if (m < 1) {
      out.push_back(what + ": mesh " + list_str(mesh) + " has an axis of size " + std::to_string(m));
      return;
    }
    product *= m;
    if (product > (int64_t{1} << 31)) break;
  }
  if (product != static_cast<int64_t>(devices.size()))
    out.push_back(what + ": mesh " + list_str(mesh) + " has " + std::to_string(product) + " devices, its group " +
                  std::to_string(devices.size()));
}

/** Product of the mesh axes in `axes`. */
int64_t parts(const std::vector<int64_t> &mesh, const std::vector<int> &axes) {
  int64_t p = 1;
  for (int a : axes) p *= mesh[static_cast<size_t>(a)];
  return p;
}

std::vector<std::string> sharding_problems(const Tensor &t, const Sharding &s, int num_devices) {
  std::vector<std::string> out;
  std::string what = "tensor " + quoted(t.name);
  group_problems(what, s.devices, s.mesh, num_devices, out);
  if (!out.empty()) return out;
  if (s.axes.size() != s.mesh.size()) {
    out.push_back(what + ": " + std::to_string(s.axes.size()) + " shardings for a mesh of rank " +
                  std::to_string(s.mesh.size()));
    return out;
  }
  std::map<int, std::vector<int>> split_axes;
  for (size_t a = 0; a < s.axes.size(); ++a) {
    if (s.axes[a].kind != AxisSharding::Kind::split) continue;
    int d = s.axes[a].dim;
    if (d < 0 || d >= static_cast<int>(t.shape.size()))
      out.push_back(what + ": split(" + std::to_string(d) + ") of a tensor of rank " + std::to_string(t.shape.size()));
    else
      split_axes[d].push_back(static_cast<int>(a));
  }
  for (const auto &[d, axes] : split_axes) {
    int64_t n = parts(s.mesh, axes), size = t.shape[static_cast<size_t>(d)];
    if (size % n != 0)
      out.push_back(what + ": split(" + std::to_string(d) + ") over " + std::to_string(n) +
                    " devices does not divide dim " + std::to_string(d) + " of size " + std::to_string(size));
  }
  return out;
}

std::string config_str(const std::vector<int> &devices, const std::vector<int64_t> &mesh, const std::string &axes) {
  return "devices=" + list_str(devices) + " mesh=" + list_str(mesh) + " " + axes;
}

}  // namespace

size_t primary_output(const Op &op) {
  for (size_t i = 0; i < op.outputs.size(); ++i)
    if (op.outputs[i] != kNoTensor) return i;
  return 0;
}

std::string split_obstacle(const Description &d, const std::string &name) {
  int v = d.var(name);
  CLEAVE_CHECK(v >= 0, "no var ", name, " in ", d.output_name);
  const describe::LoopVar &lv = d.vars[static_cast<size_t>(v)];
  // The kernel of a synced var synchronises its shards itself: whatever the var's role, the split is sound.
  if (lv.synced) return {};
  if (lv.role == VarRole::internal) return "it is consumed whole by an opaque function in output " + d.output_name;
  if (lv.opaque) return "it is opaque in output " + d.output_name;
  if (lv.role == VarRole::reduction) {
    if (describe::split_kind(d, v) == SplitKind::none)
      return "output " + d.output_name + " reduces it by a max, argmax or mean, not a sum";
    if (d.post && !linear_in_reduced(d.post))
      return "output " + d.output_name + " adds terms after summing it, so partial sums do not add up";
  }
  return {};
}

Sharding implied_sharding(const Op &op, const std::vector<Description> &descs, const ParallelConfig &config,
                          size_t slot) {
  Sharding s;
  s.devices = config.devices;
  s.mesh = config.mesh;
  const Description &d = descs.at(slot);
  for (const std::string &name : config.vars) {
    AxisSharding a;
    int v = name.empty() ? -1 : d.var(name);
    // A synced reduction var leaves the output whole (the kernel all-reduces); a synced output var splits it.
    const describe::LoopVar *lv = v >= 0 ? &d.vars[static_cast<size_t>(v)] : nullptr;
    if (lv && lv->role == VarRole::reduction && !lv->synced) {
      a.kind = AxisSharding::Kind::partial;
    } else if (v >= 0) {
      for (size_t k = 0; k < d.output_index.size(); ++k)
        if (d.output_index[k].coef(v) != 0) {
          a.kind = AxisSharding::Kind::split;
          a.dim = static_cast<int>(k);
          break;
        }
    }
    s.axes.push_back(a);
  }
  return s;
}

std::vector<std::string> config_problems(const Graph &g, const Op &op, const std::vector<Description> &descs,
                                         const ParallelConfig &c, int devices) {
  std::vector<std::string> out;
  std::string what = "op " + quoted(op.name);
  group_problems(what, c.devices, c.mesh, devices, out);
  if (!out.empty()) return out;
  if (c.vars.size() != c.mesh.size()) {
    out.push_back(what + ": " + std::to_string(c.vars.size()) + " split vars for a mesh of rank " +
                  std::to_string(c.mesh.size()));
    return out;
  }
  const Description &primary = descs.at(primary_output(op));
  std::map<std::string, std::vector<int>> axes_of;
  for (size_t a = 0; a < c.vars.size(); ++a)
    if (!c.vars[a].empty()) axes_of[c.vars[a]].push_back(static_cast<int>(a));
  for (const auto &[name, axes] : axes_of) {
    int v = primary.var(name);
    if (v < 0) {
      std::string known;
      for (const describe::LoopVar &lv : primary.vars) known += (known.empty() ? "" : ", ") + lv.name;
      out.push_back(what + ": unknown loop var " + quoted(name) + " (vars: " + (known.empty() ? "none" : known) + ")");
      continue;
    }
    std::string why;
    for (size_t k = 0; k < descs.size() && why.empty(); ++k)
      if (op.output(k) != kNoTensor && descs[k].var(name) >= 0) why = split_obstacle(descs[k], name);
    if (!why.empty()) {
      out.push_back(what + ": var " + quoted(name) + " cannot be split: " + why);
      continue;
    }
    int64_t n = parts(c.mesh, axes), extent = primary.vars[static_cast<size_t>(v)].extent;
    if (extent % n != 0)
      out.push_back(what + ": split of var " + quoted(name) + " over " + std::to_string(n) +
                    " devices does not divide its extent " + std::to_string(extent));
  }
  if (!out.empty()) return out;
  // Each output must come out as even blocks of whole dims, which is what a sharding can say.
  for (size_t k = 0; k < op.outputs.size(); ++k) {
    if (op.outputs[k] == kNoTensor) continue;
    const Tensor &t = g.tensor(op.outputs[k]);
    Sharding s = implied_sharding(op, descs, c, k);
    std::vector<std::string> uneven = sharding_problems(t, s, devices);
    if (!uneven.empty()) {
      out.push_back(what + ": its split vars do not cut output " + quoted(t.name) + " evenly: " + uneven.front());
      continue;
    }
    for (size_t i = 0; i < c.devices.size(); ++i) {
      Box have = op_region(descs[k], var_ranges(descs[k], c, static_cast<int64_t>(i))).output;
      if (have != shard_region(t.shape, s, static_cast<int64_t>(i))) {
        out.push_back(what + ": its split vars do not cut output " + quoted(t.name) +
                      " into even blocks of whole dims (device " + std::to_string(c.devices[i]) + " writes " +
                      box_str(have) + ")");
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> plan_problems(const Graph &g, const Plan &p, ValidConfigs *valid) {
  std::vector<std::string> out;
  if (valid && (valid->devices != p.devices || valid->per_op.size() != static_cast<size_t>(g.num_ops())))
    *valid = {p.devices, std::vector<std::vector<ParallelConfig>>(static_cast<size_t>(g.num_ops()))};
  std::vector<const Sharding *> shardings(static_cast<size_t>(g.num_tensors()), nullptr);
  std::vector<const ParallelConfig *> configs(static_cast<size_t>(g.num_ops()), nullptr);
  if (p.devices < 1) out.push_back("plan: device count " + std::to_string(p.devices) + " must be at least 1");
  for (const TensorEntry &e : p.tensors) {
    std::optional<TensorId> id = g.find_tensor(e.name);
    if (!id) {
      out.push_back("unknown tensor " + quoted(e.name));
    } else if (shardings[static_cast<size_t>(*id)]) {
      out.push_back("duplicate entry for tensor " + quoted(e.name));
    } else {
      shardings[static_cast<size_t>(*id)] = &e.sharding;
      for (std::string &s : sharding_problems(g.tensor(*id), e.sharding, p.devices)) out.push_back(std::move(s));
    }
  }
  for (const OpEntry &e : p.ops) {
    std::optional<OpId> id = g.find_op(e.name);
    if (!id) out.push_back("unknown op " + quoted(e.name));
    else if (configs[static_cast<size_t>(*id)]) out.push_back("duplicate entry for op " + quoted(e.name));
    else configs[static_cast<size_t>(*id)] = &e.config;
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (!shardings[static_cast<size_t>(t)]) out.push_back("missing entry for tensor " + quoted(g.tensor(t).name));
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    const ParallelConfig *c = configs[static_cast<size_t>(o)];
    if (!c) {
      out.push_back("missing entry for op " + quoted(op.name));
      continue;
    }
    std::vector<Description> descs = describe::describe(g, op);
    std::vector<ParallelConfig> *known = valid ? &valid->per_op[static_cast<size_t>(o)] : nullptr;
    if (!known || std::find(known->begin(), known->end(), *c) == known->end()) {
      std::vector<std::string> problems = config_problems(g, op, descs, *c, p.devices);
      if (!problems.empty()) {
        for (std::string &s : problems) out.push_back(std::move(s));
        continue;
      }
      if (known) known->push_back(*c);
    }
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      TensorId t = op.outputs[k];
      if (t == kNoTensor || !shardings[static_cast<size_t>(t)]) continue;
      Sharding want = implied_sharding(op, descs, *c, k);
      const Sharding &have = *shardings[static_cast<size_t>(t)];
      if (have != want)
        out.push_back("tensor " + quoted(g.tensor(t).name) + ": sharding " +
                      config_str(have.devices, have.mesh, sharding_axes_str(have)) +
                      " is inconsistent with its producer op " + quoted(op.name) + " (expected " +
                      config_str(want.devices, want.mesh, sharding_axes_str(want)) + ")");
    }
  }
  return out;
}

void complete_plan(const Graph &g, Plan &p) {
  std::vector<bool> listed(static_cast<size_t>(g.num_tensors()), false);
  for (const TensorEntry &e : p.tensors)
    if (std::optional<TensorId> id = g.find_tensor(e.name)) listed[static_cast<size_t>(*id)] = true;
  std::map<std::string, const ParallelConfig *> configs;
  for (const OpEntry &e : p.ops) configs.emplace(e.name, &e.config);
  std::vector<TensorEntry> added;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    const Op &op = g.op(o);
    auto it = configs.find(op.name);
    if (it == configs.end()) continue;
    bool missing = false;
    for (TensorId t : op.outputs) missing = missing || (t != kNoTensor && !listed[static_cast<size_t>(t)]);
    if (!missing) continue;
    std::vector<Description> descs = describe::describe(g, op);
    // An invalid config implies nothing; plan_problems reports it and the missing outputs.
    if (!config_problems(g, op, descs, *it->second, p.devices).empty()) continue;
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      TensorId t = op.outputs[k];
      if (t == kNoTensor || listed[static_cast<size_t>(t)]) continue;
      listed[static_cast<size_t>(t)] = true;
      added.push_back({g.tensor(t).name, implied_sharding(op, descs, *it->second, k)});
    }
  }
  if (added.empty()) return;
  std::vector<std::pair<int64_t, TensorEntry>> keyed;
  for (TensorEntry &e : p.tensors) {
    std::optional<TensorId> id = g.find_tensor(e.name);
    keyed.emplace_back(id ? *id : g.num_tensors(), std::move(e));
  }
  for (TensorEntry &e : added) keyed.emplace_back(*g.find_tensor(e.name), std::move(e));
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  p.tensors.clear();
  for (auto &[id, e] : keyed) p.tensors.push_back(std::move(e));
}

void validate_plan(const Graph &g, const Plan &p, ValidConfigs *valid) {
  std::vector<std::string> problems = plan_problems(g, p, valid);
  if (problems.empty()) return;
  std::string msg = "invalid plan: " + problems.front();
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more problems)";
  throw UserError(msg);
}

std::string config_check_key(const Graph &g, const Op &op) {
  std::string s(op_kind_name(op.kind));
  for (const std::vector<TensorId> *ts : {&op.inputs, &op.outputs}) {
    s += "(";
    for (TensorId t : *ts) {
      if (t == kNoTensor) {
        s += "_;";
        continue;
      }
      s += std::string(dtype_name(g.tensor(t).dtype)) + "[";
      for (int64_t d : g.tensor(t).shape) s += std::to_string(d) + ",";
      s += "];";
    }
    s += ")";
  }
  for (const auto &[key, value] : op.attrs) s += key + "=" + print_attr(value) + ";";
  return s;
}

}  // namespace cleave::plan
