#pragma once
// A rank program in several translation units, so that a large model's bundle builds on every core: g++ compiles one
// file on one core, and DenseNet-201's 2-rank program (63,000 lines) took a minute as one file.
#include <cstddef>
#include <map>
#include <string>

namespace cleave::codegen {

/** Lines of step functions per part file: each compiles in a few seconds at -O2. */
inline constexpr size_t kLinesPerPart = 6000;

/** Splits the program `source` (emit_rank_source's layout: includes, an anonymous namespace of shared variables and
 *  step functions, then main) of src/`name`.cpp into:
 *  - `name`.h: the includes, the shared variables as inline variables of namespace `program`, and the functions'
 *    declarations;
 *  - `name`_part<k>.cpp, k = 1, 2, ...: the functions, about `lines_per_part` lines each, in order;
 *  - `name`.cpp: main().
 *  Returns file name -> text, the names relative to src/. A program whose functions fit in one part, or whose layout
 *  is not emit_rank_source's, stays one file: {name.cpp: source}. Deterministic. */
std::map<std::string, std::string> split_program(const std::string &source, const std::string &name,
                                                 size_t lines_per_part = kLinesPerPart);

}  // namespace cleave::codegen
