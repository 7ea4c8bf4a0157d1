#pragma once
// Checks the invariants of graph.h and every op's shape rule. Runs after every pass in tests and debug builds, and
// on every graph read from IR text.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace cleave {

/** Every violated invariant, one line each, in graph order (empty = valid). */
std::vector<std::string> verify_problems(const Graph &g);
/** Throws UserError with the first problem (and the count of the others) if the graph is invalid. */
void verify(const Graph &g);

}  // namespace cleave
