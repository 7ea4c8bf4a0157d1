#include "planner/cost/cost_diff.h"

#include <cstdio>

namespace cleave::plan {

std::string totals_diff(const CostReport &a, const CostReport &b) {
  std::string s;
  char buf[256];
  auto row_int = [&](const char *name, int64_t x, int64_t y) {
    std::snprintf(buf, sizeof buf, "%-24s %16lld %16lld %+17lld %10s\n", name, static_cast<long long>(x),
                  static_cast<long long>(y), static_cast<long long>(y - x),
                  percent_str(growth_percent(static_cast<double>(x), static_cast<double>(y))).c_str());
    s += buf;
  };
  std::snprintf(buf, sizeof buf, "%-24s %16s %16s %17s %10s\n", "total", "a", "b", "delta", "change");
  s += buf;
  row_int("comm_bytes", a.comm_bytes, b.comm_bytes);
  row_int("peak_memory_bytes", a.peak_memory_bytes, b.peak_memory_bytes);
  std::snprintf(buf, sizeof buf, "%-24s %16.9f %16.9f %+17.9f %10s\n", "predicted_step_seconds",
                a.predicted_step_seconds, b.predicted_step_seconds, b.predicted_step_seconds - a.predicted_step_seconds,
                percent_str(growth_percent(a.predicted_step_seconds, b.predicted_step_seconds)).c_str());
  s += buf;
  return s;
}

std::vector<std::string> threshold_failures(const CostReport &a, const CostReport &b,
                                            const std::vector<Threshold> &limits) {
  std::vector<std::string> out;
  for (const Threshold &t : limits) {
    std::string name;
    double g = 0;
    if (t.metric == "comm") {
      name = "comm_bytes";
      g = growth_percent(static_cast<double>(a.comm_bytes), static_cast<double>(b.comm_bytes));
    } else if (t.metric == "memory") {
      name = "peak_memory_bytes";
      g = growth_percent(static_cast<double>(a.peak_memory_bytes), static_cast<double>(b.peak_memory_bytes));
    } else {
      name = "predicted_step_seconds";
      g = growth_percent(a.predicted_step_seconds, b.predicted_step_seconds);
    }
    if (g > t.percent) out.push_back(name + " grew " + percent_str(g) + " (limit " + percent_str(t.percent) + ")");
  }
  return out;
}

}  // namespace cleave::plan
