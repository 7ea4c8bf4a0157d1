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
