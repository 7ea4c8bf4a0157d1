#include "planner/plan/topology.h"

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "planner/plan/json_fields.h"

namespace cleave::plan {

int Topology::devices() const {
  int n = 1;
  for (const Level &l : levels) n *= l.count;
  return n;
}

int Topology::level_between(int a, int b) const {
  int found = -1, below = 1;
  for (size_t k = 0; k < levels.size(); ++k) {
    if ((a / below) % levels[k].count != (b / below) % levels[k].count) found = static_cast<int>(k);
    below *= levels[k].count;
  }
  return found;
}

int Topology::level_spanned(const std::vector<int> &group) const {
  int level = -1;
  for (size_t i = 1; i < group.size(); ++i) level = std::max(level, level_between(group[0], group[i]));
  return level;
}

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The presets' numbers and where they come from: models/topologies/README.md (also in each JSON file's "sources").
// Latencies are not on any spec sheet: they are assumed per-message software+link costs of the order NCCL/MPI
// reach on such links (a few µs in a node, ~10 µs across nodes or over PCIe), stated as assumptions there.
std::map<std::string, Topology> presets() {
  std::map<std::string, Topology> m;
  // Tofu §7 (EuroSys'19): AWS p2.8xlarge, 8 GPUs (4 Tesla K80 boards, 2 GK210 each) on PCIe, 21 GB/s shared.
  // Per GK210: 12 GB GDDR5, 240 GB/s (half of the board's 480 GB/s), 4.37 TFLOPS f32 (half of 8.74 with boost).
  m["k80x8"] = {"k80x8", {"Tesla K80 (one GK210)", static_cast<int64_t>(12 * kGiB), 4.37e12, 2.4e11},
                {{"pcie", 8, 2.1e10, 1e-5, true}}};
  // FlexFlow §8 (SysML'19): 4 nodes x 4 Tesla P100 (SXM2: 16 GB HBM2, 732 GB/s, 10.6 TFLOPS f32), NVLink 1.0 in a
  // node (20 GB/s per link and direction), 100 Gb/s EDR InfiniBand across nodes (12.5 GB/s).
  m["p100-4x4"] = {"p100-4x4", {"Tesla P100 SXM2", static_cast<int64_t>(16 * kGiB), 1.06e13, 7.32e11},
                   {{"nvlink", 4, 2e10, 5e-6, false}, {"infiniband", 4, 1.25e10, 1e-5, false}}};
  // TensorOpt (TPDS'21): 2 nodes x 8 V100 (SXM2 32 GB: 900 GB/s, 15.7 TFLOPS f32), NVLink 2.0 (25 GB/s per link and
  // direction) in a node, 100 Gb/s InfiniBand across.
  m["v100-2x8"] = {"v100-2x8", {"Tesla V100 SXM2 32GB", static_cast<int64_t>(32 * kGiB), 1.57e13, 9e11},
                   {{"nvlink", 8, 2.5e10, 5e-6, false}, {"infiniband", 2, 1.25e10, 1e-5, false}}};
  // One HGX H100 node: 8 H100 SXM5 (80 GB HBM3, 3.35 TB/s, 66.9 TFLOPS f32) on NVLink 4 through NVSwitch
  // (900 GB/s per GPU, both directions: 450 GB/s each way).
  m["h100x8"] = {"h100x8", {"H100 SXM5", static_cast<int64_t>(80 * kGiB), 6.69e13, 3.35e12},
                 {{"nvlink", 8, 4.5e11, 3e-6, false}}};
  return m;
}

using nlohmann::json;

const json &field(const json &j, const std::string &source, const std::string &path, const std::string &key) {
  auto it = j.find(key);
  if (it == j.end()) bad(source, path, "missing");
  return *it;
}

double positive(const json &j, const std::string &source, const std::string &path, const std::string &key) {
  const json &v = field(j, source, path, key);
  if (!v.is_number()) bad(source, path, "must be a number");
  double d = v.get<double>();
  if (!(d > 0) || !std::isfinite(d)) bad(source, path, "must be positive");
  return d;
}

std::string text(const json &j, const std::string &source, const std::string &path, const std::string &key) {
  const json &v = field(j, source, path, key);
  if (!v.is_string() || v.get<std::string>().empty()) bad(source, path, "must be a non-empty string");
  return v.get<std::string>();
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const auto &[name, t] : presets()) out.push_back(name);
  return out;
}

Topology preset_topology(const std::string &name) {
  auto all = presets();
  auto it = all.find(name);
  if (it == all.end()) {
    std::string names;
    for (const auto &[n, t] : all) names += (names.empty() ? "" : ", ") + n;
    CLEAVE_USER_ERROR("unknown topology \"", name, "\" (presets: ", names, "; or a .json file)");
  }
  return it->second;
}

Topology parse_topology(const std::string &json_text, const std::string &source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error &e) {
    bad(source, "(syntax)", std::string("not valid JSON: ") + e.what());
  }
  check_keys(j, source, "", {"name", "device", "levels", "sources"});
  Topology t;
  t.name = text(j, source, "name", "name");
  const json &d = field(j, source, "device", "device");
  check_keys(d, source, "device",
             {"name", "memory_bytes", "peak_flops", "memory_bandwidth", "read_latency", "read_row_latency"});
  t.device.name = text(d, source, "device.name", "name");
  const json &mem = field(d, source, "device.memory_bytes", "memory_bytes");
  if (!mem.is_number_integer() || mem.get<int64_t>() <= 0) bad(source, "device.memory_bytes", "must be a positive integer");
  t.device.memory_bytes = mem.get<int64_t>();
  t.device.peak_flops = positive(d, source, "device.peak_flops", "peak_flops");
  t.device.memory_bandwidth = positive(d, source, "device.memory_bandwidth", "memory_bandwidth");
  for (auto [key, to] : {std::pair{"read_latency", &t.device.read_latency},
                         std::pair{"read_row_latency", &t.device.read_row_latency}})
    if (auto r = d.find(key); r != d.end()) {
      if (!r->is_number() || !(r->get<double>() >= 0) || !std::isfinite(r->get<double>()))
        bad(source, std::string("device.") + key, "must be a number >= 0");
      *to = r->get<double>();
    }
  const json &levels = field(j, source, "levels", "levels");
  if (!levels.is_array() || levels.empty()) bad(source, "levels", "must be a non-empty array");
  int64_t total = 1;
  for (size_t i = 0; i < levels.size(); ++i) {
    std::string at = "levels[" + std::to_string(i) + "]";
    const json &l = levels[i];
    check_keys(l, source, at, {"name", "count", "bandwidth", "latency", "shared"});
    Level level;
    level.name = text(l, source, at + ".name", "name");
    const json &count = field(l, source, at + ".count", "count");
    if (!count.is_number_integer() || count.get<int64_t>() < 1 || count.get<int64_t>() > 65536)
      bad(source, at + ".count", "must be an integer from 1 to 65536");
    level.count = count.get<int>();
    total *= level.count;
    if (total > 65536) bad(source, at + ".count", "more than 65536 devices in all");
    level.bandwidth = positive(l, source, at + ".bandwidth", "bandwidth");
    const json &lat = field(l, source, at + ".latency", "latency");
    if (!lat.is_number() || !(lat.get<double>() >= 0) || !std::isfinite(lat.get<double>()))
      bad(source, at + ".latency", "must be a number >= 0");
    level.latency = lat.get<double>();
    if (auto s = l.find("shared"); s != l.end()) {
      if (!s->is_boolean()) bad(source, at + ".shared", "must be true or false");
      level.shared = s->get<bool>();
    }
    t.levels.push_back(level);
  }
  if (auto s = j.find("sources"); s != j.end()) {
    if (!s->is_array()) bad(source, "sources", "must be an array of strings");
    for (const auto &e : *s)
      if (!e.is_string()) bad(source, "sources", "must be an array of strings");
  }
  return t;
}

Topology load_topology(const std::string &name_or_file) {
  auto all = presets();
  if (auto it = all.find(name_or_file); it != all.end()) return it->second;
  bool looks_like_file = name_or_file.find('/') != std::string::npos || name_or_file.find('.') != std::string::npos;
  if (!looks_like_file) preset_topology(name_or_file);  // throws: unknown preset
  std::ifstream f(name_or_file);
  if (!f) CLEAVE_USER_ERROR(name_or_file, ": cannot open topology file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_topology(ss.str(), name_or_file);
}

std::string topology_json(const Topology &t) {
  json j;
  j["name"] = t.name;
  j["device"] = {{"name", t.device.name},
                 {"memory_bytes", t.device.memory_bytes},
                 {"peak_flops", t.device.peak_flops},
                 {"memory_bandwidth", t.device.memory_bandwidth}};
  if (t.device.read_latency > 0) j["device"]["read_latency"] = t.device.read_latency;
  if (t.device.read_row_latency > 0) j["device"]["read_row_latency"] = t.device.read_row_latency;
  j["levels"] = json::array();
  for (const Level &l : t.levels) {
    json e = {{"name", l.name}, {"count", l.count}, {"bandwidth", l.bandwidth}, {"latency", l.latency}};
    if (l.shared) e["shared"] = true;
    j["levels"].push_back(e);
  }
  return j.dump(1) + "\n";
}

}  // namespace cleave::plan
