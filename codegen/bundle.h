#pragma once
// The bundle writer (DESIGN §6): plan.txt, src/rank_<r>.cpp, CMakeLists.txt, runtime/, weights/rank_<r>.bin,
// launch/mpirun.sh and manifest.json (with the FNV-1a-64 of every other file). Deterministic: same graph, plan and
// model path => byte-identical files.
#include <cstdint>
#include <string>

#include "codegen/lower.h"
#include "ir/graph.h"
#include "planner/plan.h"

namespace cleave::codegen {

/** The C++ source of rank `r`'s program. */
std::string emit_rank_source(const Graph &g, const Lowered &l, int r);

/** Writes the whole bundle into `dir` (which must exist and be empty). `model_path` is recorded in the manifest;
 *  `backend` ("cpu" or "cuda") is the manifest's backend and the default of the bundle's CLEAVE_BACKEND. */
void write_bundle(const Graph &g, const plan::Plan &p, const Lowered &l, const std::string &dir,
                  const std::string &model_path, const std::string &backend = "cpu");

/** FNV-1a 64-bit of `bytes`, as 16 lower-case hex digits. */
std::string fnv1a64_hex(const std::string &bytes);

/** The raw checkpoint format of runtime/cpu/io.cpp (magic "CLEAVEC1", count, then name length, name, byte count,
 *  bytes per buffer), for the weights files and for reading trained shards back. */
std::string encode_checkpoint(const std::vector<std::pair<std::string, std::string>> &buffers);
std::vector<std::pair<std::string, std::string>> decode_checkpoint(const std::string &bytes, const std::string &path);

}  // namespace cleave::codegen
