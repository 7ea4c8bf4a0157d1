// Strict JSON field checks shared by the topology and profile readers (json_fields.h).
#include "planner/plan/json_fields.h"

#include <algorithm>

#include "ir/error.h"

namespace cleave::plan {

void bad(const std::string &source, const std::string &field, const std::string &problem) {
  CLEAVE_USER_ERROR(source, ": ", field, ": ", problem);
}

nlohmann::json parse_json(const std::string &text, const std::string &source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    // nlohmann's message names the byte; keep it to one line.
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    bad(source, "(top level)", "malformed JSON: " + what);
  }
}

void check_keys(const nlohmann::json &j, const std::string &source, const std::string &where,
                const std::set<std::string> &allowed) {
  if (!j.is_object()) bad(source, where.empty() ? "(top level)" : where, "must be an object");
  for (const auto &[key, value] : j.items())
    if (!allowed.count(key)) bad(source, where.empty() ? key : where + "." + key, "unknown field");
}

}  // namespace cleave::plan
