#pragma once
// Reading the planner's JSON inputs (topologies, profiles) strictly: errors are UserError `<source>: <field>: <problem>`.
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace cleave::plan {

/** Throws UserError `<source>: <field>: <problem>`. */
[[noreturn]] void bad(const std::string &source, const std::string &field, const std::string &problem);

/** `text` parsed; not JSON is `<source>: (top level): malformed JSON: <nlohmann's message, on one line>`. */
nlohmann::json parse_json(const std::string &text, const std::string &source);

/** `j` (at dotted path `where`, "" for the top level) must be an object whose keys are all in `allowed`. */
void check_keys(const nlohmann::json &j, const std::string &source, const std::string &where,
                const std::set<std::string> &allowed);

}  // namespace cleave::plan
