// Fuzz target: plan text -> parse -> complete -> validate -> cost (what `cleave explain` prints), against the MLP's
// training graph at batch 8. A user error is the expected end of a bad plan; anything else is a bug.
#include <cstdint>
#include <string>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/error.h"
#include "planner/cost/cost_model.h"
#include "planner/plan/plan.h"
#include "planner/plan/topology.h"
#include "planner/plan/validate.h"

namespace {

const cleave::Graph &graph() {
  static const cleave::Graph g = [] {
    cleave::ImportOptions opts;
    opts.batch = 8;
    cleave::Graph g = cleave::import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/mlp.onnx", opts);
    cleave::build_training_graph(g, {});
    return g;
  }();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const cleave::Graph &g = graph();
  static const cleave::plan::Topology topology = cleave::plan::preset_topology("k80x8");
  try {
    cleave::plan::Plan p = cleave::plan::parse_plan(std::string(reinterpret_cast<const char *>(data), size), "fuzz.plan");
    if (p.devices > topology.devices()) return 0;  // explain refuses these before costing
    cleave::plan::complete_plan(g, p);
    cleave::plan::validate_plan(g, p);
    cleave::plan::estimate_cost(g, p, topology);
  } catch (const cleave::UserError &) {
  }
  return 0;
}
