#pragma once
// Typed op attributes. Ordered by name (std::map) so printing is deterministic.
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace cleave {

using Attr = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>>;
using AttrMap = std::map<std::string, Attr>;

/** "int", "float", "string", "ints", "floats". */
const char *attr_type_name(const Attr &a);

}  // namespace cleave
