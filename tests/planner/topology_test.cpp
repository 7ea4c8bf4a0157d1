// Topologies: every preset equals its committed JSON file (models/topologies/NAME.json), the hierarchy's level
// arithmetic, and one error line naming file and field for each kind of bad file.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "planner/plan/topology.h"

namespace cleave::plan {
namespace {

TEST(Topology, PresetsEqualTheirFiles) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"h100x8", "k80x8", "p100-4x4", "v100-2x8"}));
  for (const std::string &name : preset_names()) {
    std::string path = std::string(CLEAVE_SOURCE_DIR) + "/models/topologies/" + name + ".json";
    Topology file = load_topology(path);
    EXPECT_EQ(file, preset_topology(name)) << name << ":\n" << topology_json(file) << "vs\n"
                                           << topology_json(preset_topology(name));
    EXPECT_EQ(load_topology(name), preset_topology(name));
    // The JSON form reads back to the same topology.
    EXPECT_EQ(parse_topology(topology_json(file), "x"), file);
  }
  EXPECT_EQ(preset_topology("k80x8").devices(), 8);
  EXPECT_EQ(preset_topology("p100-4x4").devices(), 16);
  EXPECT_EQ(preset_topology("v100-2x8").devices(), 16);
  EXPECT_EQ(preset_topology("h100x8").devices(), 8);
}

TEST(Topology, Levels) {
  Topology t = preset_topology("p100-4x4");  // 4 GPUs per node (level 0), 4 nodes (level 1)
  EXPECT_EQ(t.level_between(0, 0), -1);
  EXPECT_EQ(t.level_between(0, 3), 0);
  EXPECT_EQ(t.level_between(3, 4), 1);
  EXPECT_EQ(t.level_between(1, 13), 1);
  EXPECT_EQ(t.level_spanned({0, 1, 2, 3}), 0);
  EXPECT_EQ(t.level_spanned({0, 4, 8, 12}), 1);
  EXPECT_EQ(t.level_spanned({5}), -1);
}

std::string error_of(const std::string &json) {
  try {
    parse_topology(json, "t.json");
  } catch (const UserError &e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Topology, BadFilesNameFileAndField) {
  const std::string device = R"("device": {"name": "d", "memory_bytes": 100, "peak_flops": 1e9, "memory_bandwidth": 1e9})";
  const std::string level = R"({"name": "l", "count": 2, "bandwidth": 1e9, "latency": 0})";
  auto with = [&](const std::string &dev, const std::string &levels) {
    return R"({"name": "x", )" + dev + R"(, "levels": [)" + levels + "]}";
  };
  EXPECT_EQ(error_of(with(device, level)), "(accepted)");
  EXPECT_EQ(error_of("{").rfind("t.json: (syntax): not valid JSON", 0), 0u) << error_of("{");
  EXPECT_EQ(error_of("[]"), "t.json: (top level): must be an object");
  EXPECT_EQ(error_of(R"({"levels": [], )" + device + "}"), "t.json: name: missing");
  EXPECT_EQ(error_of(with(device, level).replace(1, 0, R"("speed": 1, )")), "t.json: speed: unknown field");
  EXPECT_EQ(error_of(with(R"("device": {"name": "d", "memory_bytes": 100, "peak_flops": 1e9})", level)),
            "t.json: device.memory_bandwidth: missing");
  EXPECT_EQ(error_of(with(R"("device": {"name": "d", "memory_bytes": 1.5, "peak_flops": 1e9, "memory_bandwidth": 1})",
                          level)),
            "t.json: device.memory_bytes: must be a positive integer");
  EXPECT_EQ(error_of(with(R"("device": {"name": "d", "memory_bytes": 1, "peak_flops": "fast", "memory_bandwidth": 1})",
                          level)),
            "t.json: device.peak_flops: must be a number");
  EXPECT_EQ(error_of(with(R"("device": {"name": "d", "memory_bytes": 1, "peak_flops": 1, "memory_bandwidth": 1, )"
                          R"("read_latency": -1e-6})", level)),
            "t.json: device.read_latency: must be a number >= 0");
  EXPECT_EQ(error_of(with(R"("device": {"name": "d", "memory_bytes": 1, "peak_flops": 1, "memory_bandwidth": 1, )"
                          R"("read_row_latency": "slow"})", level)),
            "t.json: device.read_row_latency: must be a number >= 0");
  {  // the optional read costs read back from the JSON form
    Topology t = parse_topology(with(R"("device": {"name": "d", "memory_bytes": 1, "peak_flops": 1, )"
                                     R"("memory_bandwidth": 1, "read_latency": 1.5e-6, "read_row_latency": 2e-7})",
                                     level),
                                "t.json");
    EXPECT_EQ(t.device.read_latency, 1.5e-6);
    EXPECT_EQ(t.device.read_row_latency, 2e-7);
    EXPECT_EQ(parse_topology(topology_json(t), "x"), t);
  }
  EXPECT_EQ(error_of(with(device, "")), "t.json: levels: must be a non-empty array");
  EXPECT_EQ(error_of(with(device, level + R"(, {"name": "m", "count": 0, "bandwidth": 1e9, "latency": 0})")),
            "t.json: levels[1].count: must be an integer from 1 to 65536");
  EXPECT_EQ(error_of(with(device, R"({"name": "l", "count": 2, "bandwidth": -1, "latency": 0})")),
            "t.json: levels[0].bandwidth: must be positive");
  EXPECT_EQ(error_of(with(device, R"({"name": "l", "count": 2, "bandwidth": 1, "latency": 0, "shared": 1})")),
            "t.json: levels[0].shared: must be true or false");
  EXPECT_EQ(error_of(with(device, R"({"name": "l", "count": 2, "bandwidth": 1, "lat": 0})")),
            "t.json: levels[0].lat: unknown field");
}

TEST(Topology, UnknownPresetAndMissingFile) {
  try {
    load_topology("k81x8");
    FAIL() << "accepted";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), "unknown topology \"k81x8\" (presets: h100x8, k80x8, p100-4x4, v100-2x8; or a .json file)");
  }
  try {
    load_topology("/no/such/t.json");
    FAIL() << "accepted";
  } catch (const UserError &e) {
    EXPECT_STREQ(e.what(), "/no/such/t.json: cannot open topology file");
  }
}

}  // namespace
}  // namespace cleave::plan
