#pragma once
// Reads the text form written by print_graph (printer.h) back into a Graph: parse_graph(print_graph(g)) == g and
// print_graph(parse_graph(text)) == text for canonical text.
#include <string>

#include "ir/graph.h"

namespace cleave {

/** Parses IR text. Throws UserError `<source>:<line>: <problem>` on malformed text, unknown names, kinds, dtypes or
 *  roles, or duplicate definitions. Does not run the verifier. */
Graph parse_graph(const std::string &text, const std::string &source = "<ir>");

}  // namespace cleave
