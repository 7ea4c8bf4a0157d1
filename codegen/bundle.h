#pragma once
// The bundle writer (docs/architecture.md §6): plan.txt, src/rank_<r>.cpp (or src/ranks.cpp), CMakeLists.txt,
// runtime/, weights/rank_<r>.bin (or weights/ranks.bin), launch/mpirun.sh and manifest.json (with the FNV-1a-64 of
// every other file). Deterministic: same graph, plan and model path => byte-identical files.
#include <cstdint>
#include <string>

#include "codegen/lower.h"
#include "ir/graph.h"
#include "planner/cost/cost_model.h"
#include "planner/plan/plan.h"

namespace cleave::codegen {

/** The C++ source of rank `r`'s program. `shared`: the source to merge with the other ranks' into one program
 *  (merge_rank_sources): it keeps its rank in `rank_index` instead of checking that it runs as rank r. */
std::string emit_rank_source(const Graph &g, const Lowered &l, int r, bool shared = false);

/** Writes the whole bundle into `dir` (which must exist and be empty). `model_path` is recorded in the manifest;
 *  `backend` ("cpu" or "cuda") is the manifest's backend and the default of the bundle's CLEAVE_BACKEND.
 *  `predicted` (may be null: the fields are left out) is the cost model's report of `p` on a topology: the manifest
 *  records the topology's name, predicted_step_seconds (a fixed-format "%.3e" string, as `cleave explain` prints it)
 *  and per rank predicted_peak_memory_bytes, beside the arena codegen planned (peak_memory_bytes). */
void write_bundle(const Graph &g, const plan::Plan &p, const Lowered &l, const std::string &dir,
                  const std::string &model_path, const std::string &backend = "cpu",
                  const plan::CostReport *predicted = nullptr);

/** The compiler's runtime sources (its source tree's runtime/), which bundles copy and `cleave profile` builds its
 *  collective benchmark (runtime/bench) from. */
std::string runtime_source_dir();

/** FNV-1a 64-bit of `bytes`, as 16 lower-case hex digits. */
std::string fnv1a64_hex(const std::string &bytes);


}  // namespace cleave::codegen
