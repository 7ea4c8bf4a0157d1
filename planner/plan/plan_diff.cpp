#include "planner/plan/plan_diff.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "ir/error.h"

namespace cleave::plan {
namespace {

std::string ints(const std::vector<int> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string ints(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string str(const Sharding &s) {
  return "devices=" + ints(s.devices) + " mesh=" + ints(s.mesh) + " " + sharding_axes_str(s);
}

std::string str(const ParallelConfig &c) {
  std::string vars = "[";
  for (size_t i = 0; i < c.vars.size(); ++i) vars += (i ? "," : "") + (c.vars[i].empty() ? std::string("-") : c.vars[i]);
  return "devices=" + ints(c.devices) + " mesh=" + ints(c.mesh) + " " + vars + "]";
}

template <typename Entry, typename Str>
void diff_entries(const char *what, const std::vector<Entry> &a, const std::vector<Entry> &b, Str to_str,
                  std::vector<std::string> &out) {
  std::map<std::string, const Entry *> in_a;
  for (const Entry &e : a) in_a[e.name] = &e;
  std::set<std::string> in_b;
  for (const Entry &e : b) {
    in_b.insert(e.name);
    auto it = in_a.find(e.name);
    if (it == in_a.end()) {
      out.push_back(std::string("+ ") + what + " " + e.name + ": " + to_str(e));
    } else if (!(*it->second == e)) {
      out.push_back(std::string(what) + " " + e.name + ": " + to_str(*it->second) + " -> " + to_str(e));
    }
  }
  for (const Entry &e : a)
    if (!in_b.count(e.name)) out.push_back(std::string("- ") + what + " " + e.name + ": " + to_str(e));
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::vector<std::string> plan_changes(const Plan &a, const Plan &b) {
  std::vector<std::string> out;
  if (a.devices != b.devices)
    out.push_back("devices: " + std::to_string(a.devices) + " -> " + std::to_string(b.devices));
  diff_entries("tensor", a.tensors, b.tensors, [](const TensorEntry &e) { return str(e.sharding); }, out);
  diff_entries("op", a.ops, b.ops, [](const OpEntry &e) { return str(e.config); }, out);
  return out;
}

std::vector<Threshold> parse_thresholds(const std::string &spec) {
  std::vector<Threshold> out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    size_t eq = item.find('=');
    std::string metric = item.substr(0, eq);
    if (eq == std::string::npos || (metric != "comm" && metric != "memory" && metric != "time"))
      CLEAVE_USER_ERROR("--fail-on: \"", item, "\": expected comm|memory|time=<percent>%, e.g. comm=+5%");
    std::string value = item.substr(eq + 1);
    if (value.size() < 2 || value.back() != '%')
      CLEAVE_USER_ERROR("--fail-on: \"", item, "\": the limit must be a percentage ending in %, e.g. +5%");
    value.pop_back();
    size_t used = 0;
    double pct = 0;
    try {
      pct = std::stod(value, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used != value.size() || !std::isfinite(pct))
      CLEAVE_USER_ERROR("--fail-on: \"", item, "\": \"", value, "\" is not a number");
    out.push_back({metric, pct});
  }
  return out;
}

std::string percent_str(double p) {
  if (std::isinf(p)) return p > 0 ? "+inf%" : "-inf%";
  return fmt("%+.2f%%", p);
}

double growth_percent(double a, double b) {
  if (a == b) return 0;
  if (a == 0) return b > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  return (b - a) / a * 100.0;
}


}  // namespace cleave::plan
