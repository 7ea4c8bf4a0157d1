#pragma once
// Topologies (DESIGN §4): the machine a plan runs on. Identical devices (memory, peak FLOP/s, memory bandwidth)
// grouped hierarchically: level 0 groups `count` devices (e.g. GPUs on one node's NVLink), level 1 groups `count`
// level-0 groups (nodes on InfiniBand), and so on; the device count is the product of the counts. Device d sits at
// coordinate (d / product(counts below k)) % count_k at level k, so consecutive devices share the innermost level.
// Two devices talk over the outermost level at which their coordinates differ; a group of devices that spans a level
// uses that level's link (the slowest of its members' links, for every level above is slower in practice).
//
// A level's link: bandwidth in bytes/s per device and direction, latency in seconds (the α of α-β), and `shared`
// when every device of the level shares that bandwidth (a PCIe bus: p devices sending at once get bandwidth/p each).
//
// JSON form (models/topologies/*.json; unknown keys are errors, "sources" holds citations and is not used):
//   {"name": "p100-4x4",
//    "device": {"name": "P100", "memory_bytes": 17179869184, "peak_flops": 1.06e13, "memory_bandwidth": 7.32e11},
//               (optional "read_latency", "read_row_latency": seconds per data read and per sample it reads)
//    "levels": [{"name": "nvlink", "count": 4, "bandwidth": 2e10, "latency": 5e-6},
//               {"name": "infiniband", "count": 4, "bandwidth": 1.25e10, "latency": 1e-5}],
//    "sources": ["..."]}
#include <cstdint>
#include <string>
#include <vector>

namespace cleave::plan {

struct DeviceSpec {
  std::string name;
  int64_t memory_bytes = 0;
  /** Peak FLOP/s of the precision the runtime computes in (f32). */
  double peak_flops = 0;
  /** Memory bandwidth, bytes/s. */
  double memory_bandwidth = 0;
  /** Seconds a read of a data shard costs besides its bytes: per read (opening the .npy file) and per sample read (a
   *  seek and a read: rt::npy_read_samples); optional, default 0. */
  double read_latency = 0, read_row_latency = 0;
  bool operator==(const DeviceSpec &) const = default;
};

struct Level {
  std::string name;
  int count = 1;
  /** Bytes/s per device and direction. */
  double bandwidth = 0;
  /** Seconds per message (α). */
  double latency = 0;
  bool shared = false;
  bool operator==(const Level &) const = default;
};

struct Topology {
  std::string name;
  DeviceSpec device;
  /** Innermost first. */
  std::vector<Level> levels;
  bool operator==(const Topology &) const = default;

  int devices() const;
  /** The outermost level at which devices a and b differ; -1 if a == b. */
  int level_between(int a, int b) const;
  /** The outermost level any two of `group` differ at; -1 for fewer than two distinct devices. */
  int level_spanned(const std::vector<int> &group) const;
};

/** Names of the built-in presets, sorted: h100x8, k80x8, p100-4x4, v100-2x8. */
std::vector<std::string> preset_names();
/** A built-in preset (the same content as models/topologies/NAME.json). Throws UserError for an unknown name. */
Topology preset_topology(const std::string &name);
/** Parses the JSON form; errors are UserError `<source>: <field>: <problem>`. */
Topology parse_topology(const std::string &json_text, const std::string &source);
/** A preset name, else a JSON file path. */
Topology load_topology(const std::string &name_or_file);
/** The JSON form, deterministic (keys sorted, numbers in shortest round-trip form). */
std::string topology_json(const Topology &t);

}  // namespace cleave::plan
