#pragma once
// Two kinds of error, never mixed (STYLE.md):
//  - UserError: the input (model, IR text, flag, data file) is wrong; the message is one line a user can act
//    on, lower-case, no trailing period, naming where the problem is.
//  - InternalError: a bug in Cleave; the message carries file and line.
#include <sstream>
#include <stdexcept>
#include <string>

namespace cleave {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string &msg, int exit_code = 1) : std::runtime_error(msg), exit_code_(exit_code) {}
  /** Process exit code the CLI uses for this error (2 = unsupported model features). */
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

/** `s` with control characters written as escapes (\n, \r, \t, \xHH), so a message quoting it stays one line. */
inline std::string escape_control(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      const char *hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

/** `s` quoted for an error message: control characters escaped, and cut to its first `max` characters followed by
 *  "..." when longer (a garbage line of a megabyte is not echoed whole). */
inline std::string quote_excerpt(const std::string &s, size_t max = 80) {
  if (s.size() <= max) return "\"" + escape_control(s) + "\"";
  return "\"" + escape_control(s.substr(0, max)) + "...\"";
}

}  // namespace cleave

/** Throws a UserError whose message is the concatenation of the arguments. */
#define CLEAVE_USER_ERROR(...) throw ::cleave::UserError(::cleave::detail::concat(__VA_ARGS__))

/** Throws an InternalError naming file and line unless `cond` holds. */
#define CLEAVE_CHECK(cond, ...)                                                                          \
  do {                                                                                                   \
    if (!(cond))                                                                                         \
      throw ::cleave::InternalError(::cleave::detail::concat("internal error at ", __FILE__, ":", __LINE__, \
                                                             ": check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (0)
