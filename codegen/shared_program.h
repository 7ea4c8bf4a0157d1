#pragma once
// One program for ranks that differ only in constants. A data-parallel plan gives every rank the same statements
// over its own samples: the rank sources differ in sample offsets, arena offsets, which rank counts a gradient box
// in the global norm, and such numbers. Building N copies of the same program is N compilations (64 for a
// 64-device bundle); this pass finds where the sources differ and, where that is only in literals, writes one
// program that looks each of them up by its rank.
#include <optional>
#include <string>
#include <vector>

namespace cleave::codegen {

/** The name of the variable a shared program keeps its rank in (set by main() right after rt::init, before any
 *  table is read); emit_rank_source declares and sets it when asked for a source to be merged. */
inline constexpr const char *kRankIndex = "rank_index";

/** Merges the sources of every rank of a bundle (in rank order; each declares `int rank_index = 0;` at namespace
 *  scope and sets it in main) into one program that runs as any of them. The sources are compared token by token,
 *  comments and spacing aside. Where they have the same tokens except for literals (numbers, true/false, strings)
 *  inside host functions, the result is the first source with each such literal replaced by `rank_v<k>[rank_index]`,
 *  rank_v<k> a table of that literal's value in every rank, declared right after `rank_index` (equal tables are
 *  shared); comments that differ are left out. Returns nullopt when the sources differ in anything else, or in a
 *  literal of a device function (a CLEAVE_HD lambda, which cannot read host tables under CUDA), of a file-scope
 *  initializer (which runs before main sets the rank), or of mixed kinds across ranks. Deterministic. */
std::optional<std::string> merge_rank_sources(const std::vector<std::string> &sources);

}  // namespace cleave::codegen
