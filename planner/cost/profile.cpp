#include "planner/cost/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ir/describe/description.h"
#include "ir/error.h"
#include "planner/plan/json_fields.h"
#include "planner/plan/region.h"

namespace cleave::plan {

double interpolate(const std::vector<std::pair<double, double>> &points, double x) {
  CLEAVE_CHECK(!points.empty(), "interpolate over no points");
  if (x <= points.front().first) return points.front().second;
  for (size_t i = 1; i < points.size(); ++i) {
    const auto &[x0, y0] = points[i - 1];
    const auto &[x1, y1] = points[i];
    if (x <= x1) return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  const auto &[xl, yl] = points.back();
  if (points.size() == 1) return yl * x / xl;
  const auto &[xp, yp] = points[points.size() - 2];
  return std::max(yl, yl + (yl - yp) * (x - xl) / (xl - xp));
}

double Profile::scale(int device) const {
  return device >= 0 && static_cast<size_t>(device) < rank_scale.size() ? rank_scale[static_cast<size_t>(device)] : 1;
}

std::optional<double> Profile::compute_seconds(const std::string &op, const std::string &key, int device) const {
  auto o = compute.find(op);
  if (o == compute.end()) return std::nullopt;
  auto k = o->second.find(key);
  if (k == o->second.end()) return std::nullopt;
  return k->second * scale(device);
}

std::optional<double> Profile::collective_seconds(const std::string &kind, int group, double bytes) const {
  auto c = collectives.find(kind);
  if (c == collectives.end()) return std::nullopt;
  auto g = c->second.find(group);
  if (g == c->second.end() || g->second.empty()) return std::nullopt;
  return interpolate(g->second, bytes);
}

std::optional<double> Profile::statement_seconds(const std::string &kind, double bytes, int device) const {
  auto c = statements.find(kind);
  if (c == statements.end() || c->second.empty()) return std::nullopt;
  return interpolate(c->second, bytes) * scale(device);
}

std::optional<std::vector<double>> fit_rank_scale(const std::vector<std::vector<double>> &times, int ranks) {
  size_t nr = static_cast<size_t>(ranks);
  std::vector<double> s(nr, 1.0);
  std::vector<const std::vector<double> *> shared;  // items run by two ranks or more
  std::vector<char> seen(nr, 0);                    // ranks that ran one of them
  for (const auto &t : times) {
    CLEAVE_CHECK(t.size() == nr, "fit_rank_scale: an item has ", t.size(), " ranks, not ", ranks);
    if (std::count_if(t.begin(), t.end(), [](double x) { return x > 0; }) < 2) continue;
    shared.push_back(&t);
    for (size_t r = 0; r < nr; ++r) seen[r] |= t[r] > 0;
  }
  if (shared.empty()) return std::nullopt;
  std::vector<double> n(shared.size());
  // Alternating: n from s, then s from n, scaled to mean 1, until no speed moves by 1e-12 (relative). Ranks sharing
  // every item (a data plan) settle in one round; a chain of ranks, each sharing items with the next only, in a few
  // hundred. Ranks in parts that share no item with each other are each scaled to mean 1 on their own.
  for (int round = 0; round < 100000; ++round) {
    for (size_t i = 0; i < shared.size(); ++i) {
      double sum = 0;
      int k = 0;
      for (size_t r = 0; r < nr; ++r)
        if ((*shared[i])[r] > 0) sum += (*shared[i])[r] / s[r], ++k;
      n[i] = sum / k;
    }
    std::vector<double> next(nr, 1.0);
    double mean = 0;
    int measured = 0;
    for (size_t r = 0; r < nr; ++r) {
      if (!seen[r]) continue;
      double num = 0, den = 0;
      for (size_t i = 0; i < shared.size(); ++i)
        if ((*shared[i])[r] > 0) num += (*shared[i])[r], den += n[i];
      next[r] = num / den;
      mean += next[r], ++measured;
    }
    mean /= measured;
    double moved = 0;
    for (size_t r = 0; r < nr; ++r) {
      if (seen[r]) next[r] /= mean;
      moved = std::max(moved, std::abs(next[r] - s[r]) / s[r]);
    }
    s = std::move(next);
    if (moved < 1e-12) break;
  }
  return s;
}

std::string shard_key(const Graph &g, const Op &op, const ParallelConfig &config, int64_t index) {
  return shard_key(op, describe::describe(g, op), config, index);
}

std::string shard_key(const Op &op, const std::vector<describe::Description> &descs, const ParallelConfig &config,
                      int64_t index) {
  for (size_t k = 0; k < descs.size(); ++k) {
    if (op.output(k) == kNoTensor) continue;
    std::vector<Interval> ranges = var_ranges(descs[k], config, index);
    std::string key;
    for (size_t v = 0; v < descs[k].vars.size(); ++v)
      key += (v ? "," : "") + descs[k].vars[v].name + "=" + std::to_string(std::max<int64_t>(ranges[v].size(), 0));
    return key;
  }
  return "";
}

namespace {

using nlohmann::json;

double seconds(const json &j, const std::string &source, const std::string &where) {
  if (!j.is_number()) bad(source, where, "must be a number");
  double v = j.get<double>();
  if (!std::isfinite(v) || v <= 0) bad(source, where, "must be a positive number of seconds");
  return v;
}

/** A double rounded to 6 significant digits (measurements carry no more; the file stays short and diffable). */
double round6(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}

/** JSON text with every innermost array (of scalars) on one line: a curve point reads "[4096, 2.8e-06]". */
std::string compact_arrays(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {  // a string (an op name may hold brackets): copied as it is
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      out += text.substr(i, end - i + 1);
      i = end;
      continue;
    }
    if (text[i] != '[') {
      out += text[i];
      continue;
    }
    size_t close = text.find_first_of("[]{\"", i + 1);
    if (close == std::string::npos || text[close] != ']') {
      out += text[i];
      continue;
    }
    // Numbers only: drop the line breaks and indentation.
    std::string inner;
    bool space = false;
    for (size_t k = i + 1; k < close; ++k) {
      char c = text[k];
      if (c == '\n' || c == ' ') {
        space = !inner.empty();
        continue;
      }
      if (space && inner.back() == ',') inner += ' ';
      space = false;
      inner += c;
    }
    out += "[" + inner + "]";
    i = close;
  }
  return out;
}

/** A curve of [bytes, seconds] points with increasing positive bytes. */
std::vector<std::pair<double, double>> curve(const json &points, const std::string &source, const std::string &w) {
  if (!points.is_array() || points.empty()) bad(source, w, "must be a non-empty array of [bytes, seconds]");
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < points.size(); ++i) {
    std::string pw = w + "[" + std::to_string(i) + "]";
    const json &pt = points[i];
    if (!pt.is_array() || pt.size() != 2 || !pt[0].is_number()) bad(source, pw, "must be [bytes, seconds]");
    double bytes = pt[0].get<double>();
    if (!(bytes > 0) || !std::isfinite(bytes)) bad(source, pw, "bytes must be positive");
    if (!out.empty() && bytes <= out.back().first) bad(source, pw, "bytes must increase along the curve");
    out.emplace_back(bytes, seconds(pt[1], source, pw));
  }
  return out;
}

}  // namespace

Profile parse_profile(const std::string &json_text, const std::string &source) {
  json j = parse_json(json_text, source);
  check_keys(j, source, "",
             {"format", "backend", "compute", "collectives", "statements", "rank_scale", "statement_gap", "plans"});
  Profile p;
  if (!j.contains("format")) bad(source, "format", "missing");
  if (j["format"] != "cleave-profile-1") bad(source, "format", "must be \"cleave-profile-1\"");
  if (j.contains("backend")) {
    if (!j["backend"].is_string() || (j["backend"] != "cpu" && j["backend"] != "cuda"))
      bad(source, "backend", "must be \"cpu\" or \"cuda\"");
    p.backend = j["backend"].get<std::string>();
  }
  if (j.contains("compute")) {
    const json &c = j["compute"];
    if (!c.is_object()) bad(source, "compute", "must be an object");
    for (const auto &[op, shards] : c.items()) {
      std::string where = "compute." + op;
      if (!shards.is_object()) bad(source, where, "must be an object of shard keys");
      for (const auto &[key, secs] : shards.items()) p.compute[op][key] = seconds(secs, source, where + "." + key);
    }
  }
  if (j.contains("collectives")) {
    const json &c = j["collectives"];
    std::set<std::string> kinds(std::begin(kProfileCollectives), std::end(kProfileCollectives));
    check_keys(c, source, "collectives", kinds);
    for (const auto &[kind, groups] : c.items()) {
      std::string where = "collectives." + kind;
      if (!groups.is_object()) bad(source, where, "must be an object of group sizes");
      for (const auto &[size, points] : groups.items()) {
        std::string w = where + "." + size;
        size_t used = 0;
        int n = 0;
        try {
          n = std::stoi(size, &used);
        } catch (const std::exception &) {
          used = 0;
        }
        if (used != size.size() || n < 2) bad(source, w, "group size must be an integer >= 2");
        p.collectives[kind][n] = curve(points, source, w);
      }
    }
  }
  if (j.contains("statements")) {
    const json &c = j["statements"];
    check_keys(c, source, "statements",
               std::set<std::string>(std::begin(kProfileStatements), std::end(kProfileStatements)));
    for (const auto &[kind, points] : c.items()) p.statements[kind] = curve(points, source, "statements." + kind);
  }
  if (j.contains("rank_scale")) {
    const json &rs = j["rank_scale"];
    if (!rs.is_array() || rs.empty()) bad(source, "rank_scale", "must be a non-empty array of numbers, one per rank");
    for (size_t r = 0; r < rs.size(); ++r) {
      std::string w = "rank_scale[" + std::to_string(r) + "]";
      if (!rs[r].is_number()) bad(source, w, "must be a number");
      double v = rs[r].get<double>();
      if (!std::isfinite(v) || v <= 0) bad(source, w, "must be a positive number");
      p.rank_scale.push_back(v);
    }
  }
  if (j.contains("statement_gap")) {
    const json &v = j["statement_gap"];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      bad(source, "statement_gap", "must be a number >= 0 (seconds)");
    p.statement_gap = v.get<double>();
  }
  if (j.contains("plans")) {
    const json &ps = j["plans"];
    if (!ps.is_array()) bad(source, "plans", "must be an array");
    for (size_t i = 0; i < ps.size(); ++i) {
      std::string w = "plans[" + std::to_string(i) + "]";
      check_keys(ps[i], source, w, {"name", "devices", "step_seconds"});
      ProfiledPlan pp;
      if (!ps[i].contains("name") || !ps[i]["name"].is_string()) bad(source, w + ".name", "must be a string");
      if (!ps[i].contains("devices") || !ps[i]["devices"].is_number_integer() || ps[i]["devices"].get<int>() < 1)
        bad(source, w + ".devices", "must be a positive integer");
      if (!ps[i].contains("step_seconds")) bad(source, w + ".step_seconds", "missing");
      pp.name = ps[i]["name"].get<std::string>();
      pp.devices = ps[i]["devices"].get<int>();
      pp.step_seconds = seconds(ps[i]["step_seconds"], source, w + ".step_seconds");
      p.plans.push_back(pp);
    }
  }
  return p;
}

namespace {

/** A non-empty array of finite seconds >= 0 (a timed statement may take less than the clock's tick). */
std::vector<double> timings(const json &j, const std::string &source, const std::string &where) {
  if (!j.is_array() || j.empty()) bad(source, where, "must be a non-empty array of seconds");
  std::vector<double> out;
  for (size_t k = 0; k < j.size(); ++k) {
    if (!j[k].is_number() || !std::isfinite(j[k].get<double>()) || j[k].get<double>() < 0)
      bad(source, where + "[" + std::to_string(k) + "]", "must be a number >= 0 (seconds)");
    out.push_back(j[k].get<double>());
  }
  return out;
}

}  // namespace

RankTimings parse_rank_timings(const std::string &json_text, const std::string &source) {
  json j = parse_json(json_text, source);
  if (!j.is_object()) bad(source, "(top level)", "must be an object");
  RankTimings r;
  if (!j.contains("rank") || !j["rank"].is_number_integer() || j["rank"].get<int64_t>() < 0)
    bad(source, "rank", "must be an integer >= 0");
  if (j["rank"].get<int64_t>() > std::numeric_limits<int>::max()) bad(source, "rank", "too large");
  r.rank = j["rank"].get<int>();
  if (!j.contains("steps")) bad(source, "steps", "missing");
  r.steps = timings(j["steps"], source, "steps");
  if (!j.contains("sites") || !j["sites"].is_array()) bad(source, "sites", "must be an array");
  for (size_t i = 0; i < j["sites"].size(); ++i) {
    const json &x = j["sites"][i];
    std::string w = "sites[" + std::to_string(i) + "]";
    if (!x.is_object()) bad(source, w, "must be an object");
    RankTimings::Site site;
    if (!x.contains("kind") || !x["kind"].is_string()) bad(source, w + ".kind", "must be a string");
    site.kind = x["kind"].get<std::string>();
    if (site.kind != "kernel" && site.kind != "comm" && site.kind != "copy" && site.kind != "data")
      bad(source, w + ".kind", "must be \"kernel\", \"comm\", \"copy\" or \"data\"");
    if (x.contains("ops")) {
      if (!x["ops"].is_array()) bad(source, w + ".ops", "must be an array of op names");
      for (const json &o : x["ops"]) {
        if (!o.is_string()) bad(source, w + ".ops", "must be an array of op names");
        site.ops.push_back(o.get<std::string>());
      }
    }
    if (site.kind == "kernel" && site.ops.empty()) bad(source, w + ".ops", "a kernel must name its ops");
    if (site.kind == "copy" || site.kind == "data") {
      if (!x.contains("bytes") || !x["bytes"].is_number_integer() || x["bytes"].get<int64_t>() < 0)
        bad(source, w + ".bytes", "must be an integer >= 0");
      site.bytes = x["bytes"].get<int64_t>();
    }
    if (!x.contains("seconds")) bad(source, w + ".seconds", "missing");
    site.seconds = timings(x["seconds"], source, w + ".seconds");
    if (site.seconds.size() != r.steps.size())
      bad(source, w + ".seconds",
          "times " + std::to_string(site.seconds.size()) + " steps, not the " + std::to_string(r.steps.size()) +
              " of steps");
    r.sites.push_back(std::move(site));
  }
  return r;
}

Profile load_profile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) CLEAVE_USER_ERROR(path, ": cannot open profile file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_profile(ss.str(), path);
}

std::string profile_json(const Profile &p) {
  json j = json::object();
  j["format"] = "cleave-profile-1";
  j["backend"] = p.backend;
  json compute = json::object();
  for (const auto &[op, shards] : p.compute)
    for (const auto &[key, secs] : shards) compute[op][key] = round6(secs);
  j["compute"] = compute;
  json coll = json::object();
  for (const auto &[kind, groups] : p.collectives)
    for (const auto &[n, curve] : groups) {
      json pts = json::array();
      for (const auto &[bytes, secs] : curve) pts.push_back({static_cast<int64_t>(bytes), round6(secs)});
      coll[kind][std::to_string(n)] = pts;
    }
  j["collectives"] = coll;
  if (!p.statements.empty()) {
    json st = json::object();
    for (const auto &[kind, curve] : p.statements) {
      json pts = json::array();
      for (const auto &[bytes, secs] : curve) pts.push_back({static_cast<int64_t>(bytes), round6(secs)});
      st[kind] = pts;
    }
    j["statements"] = st;
  }
  if (!p.rank_scale.empty()) {
    json rs = json::array();
    for (double v : p.rank_scale) rs.push_back(round6(v));
    j["rank_scale"] = rs;
  }
  if (p.statement_gap > 0) j["statement_gap"] = round6(p.statement_gap);
  json plans = json::array();
  for (const ProfiledPlan &pp : p.plans)
    plans.push_back({{"name", pp.name}, {"devices", pp.devices}, {"step_seconds", round6(pp.step_seconds)}});
  j["plans"] = plans;
  return compact_arrays(j.dump(1)) + "\n";
}

}  // namespace cleave::plan
