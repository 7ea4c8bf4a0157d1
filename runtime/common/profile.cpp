// Self-profiling of rank programs (rt.h, "profiling"): per-site and per-step times, written as JSON per rank. The
// backend supplies the clock (common/profile_clock.h). Mark slots: site k begins at 2k and ends at 2k+1; the step's
// marks follow the sites'.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cleave/rt.h"
#include "common/process.h"
#include "common/profile_clock.h"

namespace cleave::rt {
namespace detail {
bool g_profiling = false;
}  // namespace detail

namespace {

struct State {
  std::string prefix;
  const ProfileSite *sites = nullptr;
  const char *const *ops = nullptr;
  int count = 0;
  std::vector<char> marked;                 // per site: ran (both marks) this step
  std::vector<std::vector<double>> seconds;  // per site, per step
  std::vector<double> steps;                 // per step, wall clock
  std::chrono::steady_clock::time_point step_start;
};
State g;

std::string json_string(const char *s) {
  std::string out = "\"";
  for (const char *p = s; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_seconds(const std::vector<double> &v) {
  std::string s = "[";
  char b[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(b, sizeof b, "%s%.6e", i ? ", " : "", v[i]);
    s += b;
  }
  return s + "]";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void profile_setup(const ProfileSite *sites, int count, const char *const *ops) {
  const char *prefix = std::getenv("CLEAVE_PROFILE");
  if (!prefix || !*prefix) return;
  g.prefix = prefix;
  g.sites = sites;
  g.ops = ops;
  g.count = count;
  g.marked.assign(static_cast<size_t>(count), 0);
  g.seconds.assign(static_cast<size_t>(count), {});
  host::clock_reserve(2 * count + 2);
  detail::g_profiling = true;
}

namespace detail {

void profile_mark(int site, bool end) {
  if (site < 0 || site >= g.count) fail("profile site " + std::to_string(site) + " out of range");
  if (graph_capturing()) return;  // a captured step's statements are not timed one by one (rt.h)
  host::clock_mark(2 * site + (end ? 1 : 0));
  if (end) g.marked[static_cast<size_t>(site)] = 1;
}

void profile_step(bool end) {
  if (!end) {
    host::clock_sync();
    std::fill(g.marked.begin(), g.marked.end(), 0);
    g.step_start = std::chrono::steady_clock::now();
    return;
  }
  host::clock_sync();
  g.steps.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - g.step_start).count());
  for (int k = 0; k < g.count; ++k)
    g.seconds[static_cast<size_t>(k)].push_back(g.marked[static_cast<size_t>(k)] ? host::clock_seconds(2 * k, 2 * k + 1)
                                                                                : 0.0);
}

}  // namespace detail

void profile_finish() {
  if (!detail::g_profiling) return;
  const Context &c = context();
  std::string path = g.prefix + ".rank_" + std::to_string(c.rank) + ".json";
  std::string s = "{\"rank\": " + std::to_string(c.rank) + ", \"world\": " + std::to_string(c.world) +
                  ",\n \"steps\": " + json_seconds(g.steps) + ",\n \"sites\": [";
  for (int k = 0; k < g.count; ++k) {
    const ProfileSite &site = g.sites[k];
    static const char *const kKind[] = {"\"kernel\"", "\"comm\"", "\"copy\"", "\"data\""};
    s += std::string(k ? ",\n  " : "\n  ") + "{\"kind\": " + kKind[site.kind] + ", \"ops\": [";
    for (int i = 0; i < site.num_ops; ++i) s += (i ? ", " : "") + json_string(g.ops[site.first_op + i]);
    s += "], \"shard\": " + json_string(site.shard);
    if (site.kind == ProfileSite::copy || site.kind == ProfileSite::data) s += ", \"bytes\": " + std::to_string(site.bytes);
    s += ", \"seconds\": " + json_seconds(g.seconds[static_cast<size_t>(k)]) + "}";
  }
  s += "]}\n";
  // Written whole to a temporary name, then renamed: a reader never sees half a file.
  std::string tmp = path + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f || std::fwrite(s.data(), 1, s.size(), f) != s.size() || std::fclose(f) != 0)
    fail("cannot write the profile " + path);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot write the profile " + path);
  // The first step warms caches and allocators up: the median is over the rest (all of them when there is one).
  std::vector<double> timed(g.steps.begin() + (g.steps.size() > 1 ? 1 : 0), g.steps.end());
  char msg[256];
  std::snprintf(msg, sizeof msg, "profile: step median %.6e s over %zu step%s after %d warm-up step%s (%s.rank_*.json)",
                median(timed), timed.size(), timed.size() == 1 ? "" : "s", g.steps.size() > 1 ? 1 : 0,
                g.steps.size() > 1 ? "" : "s", g.prefix.c_str());
  log_info(msg);
  detail::g_profiling = false;
}

}  // namespace cleave::rt
