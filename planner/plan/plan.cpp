// The plan's canonical text: printer and parser (format in plan.h).
#include "planner/plan/plan.h"

#include <cctype>

#include "ir/error.h"
#include "ir/printer.h"

namespace cleave::plan {
namespace {

template <typename T>
std::string int_list(const std::vector<T> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string group_str(const std::vector<int> &devices, const std::vector<int64_t> &mesh) {
  return "devices=" + int_list(devices) + " mesh=" + int_list(mesh);
}

std::string vars_str(const ParallelConfig &c) {
  std::string s = "[";
  for (size_t i = 0; i < c.vars.size(); ++i) s += (i ? "," : "") + (c.vars[i].empty() ? "-" : c.vars[i]);
  return s + "]";
}

/** Reads one line of plan text. Errors name the source and line. */
class LineReader {
 public:
  LineReader(const std::string &line, const std::string &source, int lineno)
      : s_(line), where_(source + ":" + std::to_string(lineno) + ": ") {}

  [[noreturn]] void fail(const std::string &what) const { throw UserError(where_ + what); }

  void skip_space() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ >= s_.size();
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'" + near());
    ++pos_;
  }
  void expect_word(const std::string &w) {
    skip_space();
    if (s_.compare(pos_, w.size(), w) != 0) fail("expected '" + w + "'" + near());
    pos_ += w.size();
  }
  /** A bare word of [A-Za-z0-9_.:/+-] or a quoted name. */
  std::string name(const char *what) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '"') {
      ++pos_;
      std::string r;
      while (pos_ < s_.size() && s_[pos_] != '"') {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
        r += s_[pos_++];
      }
      if (pos_ >= s_.size()) fail(std::string("unterminated quoted ") + what);
      ++pos_;
      return r;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && bare(s_[pos_])) ++pos_;
    if (start == pos_) fail(std::string("expected ") + what + near());
    return s_.substr(start, pos_ - start);
  }
  int64_t integer(const char *what) {
    skip_space();
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == start || (pos_ == start + 1 && s_[start] == '-')) fail(std::string("expected ") + what + near());
    try {
      return std::stoll(s_.substr(start, pos_ - start));
    } catch (const std::exception &) {
      fail(std::string(what) + " out of range");
    }
  }
  template <typename T>
  std::vector<T> int_list(const char *what) {
    std::vector<T> r;
    expect('[');
    if (peek(']')) {
      ++pos_;
      return r;
    }
    for (;;) {
      int64_t v = integer(what);
      if (static_cast<int64_t>(static_cast<T>(v)) != v) fail(std::string(what) + " out of range");
      r.push_back(static_cast<T>(v));
      if (peek(']')) break;
      expect(',');
    }
    ++pos_;
    return r;
  }
  /** Entries of a bracketed, comma-separated list, each read by `item`. */
  template <typename F>
  void bracket_list(const F &item) {
    expect('[');
    if (peek(']')) {
      ++pos_;
      return;
    }
    for (;;) {
      item();
      if (peek(']')) break;
      expect(',');
    }
    ++pos_;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected text" + near());
  }

 private:
  static bool bare(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' ||
           c == '-';
  }
  std::string near() const {
    if (pos_ >= s_.size()) return " at end of line";
    return " near " + quote_excerpt(s_.substr(pos_, 17), 16);
  }

  const std::string &s_;
  std::string where_;
  size_t pos_ = 0;
};

void read_group(LineReader &r, std::vector<int> &devices, std::vector<int64_t> &mesh) {
  r.expect_word("devices=");
  devices = r.int_list<int>("device id");
  r.expect_word("mesh=");
  mesh = r.int_list<int64_t>("mesh size");
}

}  // namespace

std::string sharding_axes_str(const Sharding &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.axes.size(); ++i) {
    r += i ? "," : "";
    switch (s.axes[i].kind) {
      case AxisSharding::Kind::replicate: r += "replicate"; break;
      case AxisSharding::Kind::partial: r += "partial"; break;
      case AxisSharding::Kind::split: r += "split(" + std::to_string(s.axes[i].dim) + ")"; break;
    }
  }
  return r + "]";
}

std::string print_plan(const Plan &p) {
  std::string s = "plan devices=" + std::to_string(p.devices) + "\n";
  for (const TensorEntry &t : p.tensors)
    s += "tensor " + print_name(t.name) + " " + group_str(t.sharding.devices, t.sharding.mesh) + " " +
         sharding_axes_str(t.sharding) + "\n";
  for (const OpEntry &o : p.ops)
    s += "op " + print_name(o.name) + " " + group_str(o.config.devices, o.config.mesh) + " " + vars_str(o.config) +
         "\n";
  return s;
}

Plan parse_plan(const std::string &text, const std::string &source) {
  Plan p;
  bool header = false;
  size_t start = 0;
  int lineno = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text.size() : nl + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LineReader r(line, source, lineno);
    if (r.at_end() || r.peek('#')) continue;
    std::string keyword = r.name("keyword");
    if (keyword == "plan") {
      if (header) r.fail("duplicate plan header");
      r.expect_word("devices=");
      int64_t n = r.integer("device count");
      if (n < 1 || n > (1 << 20)) r.fail("device count " + std::to_string(n) + " out of range");
      p.devices = static_cast<int>(n);
      r.expect_end();  // `devices=4.0` and `devices=4 extra` are not 4
      header = true;
    } else if (!header) {
      r.fail("expected 'plan devices=N' first");
    } else if (keyword == "tensor") {
      TensorEntry t;
      t.name = r.name("tensor name");
      read_group(r, t.sharding.devices, t.sharding.mesh);
      r.bracket_list([&] {
        std::string w = r.name("sharding");
        AxisSharding a;
        if (w == "replicate") {
          a.kind = AxisSharding::Kind::replicate;
        } else if (w == "partial") {
          a.kind = AxisSharding::Kind::partial;
        } else if (w == "split") {
          a.kind = AxisSharding::Kind::split;
          r.expect('(');
          int64_t d = r.integer("split dim");
          if (d < 0 || d > (1 << 20)) r.fail("split dim " + std::to_string(d) + " out of range");
          a.dim = static_cast<int>(d);
          r.expect(')');
        } else {
          r.fail("unknown sharding " + quote_excerpt(w) + " (expected split(D), replicate or partial)");
        }
        t.sharding.axes.push_back(a);
      });
      r.expect_end();
      p.tensors.push_back(std::move(t));
    } else if (keyword == "op") {
      OpEntry o;
      o.name = r.name("op name");
      read_group(r, o.config.devices, o.config.mesh);
      r.bracket_list([&] {
        std::string v = r.name("loop var or '-'");
        o.config.vars.push_back(v == "-" ? std::string() : v);
      });
      r.expect_end();
      p.ops.push_back(std::move(o));
    } else {
      r.fail("unknown line kind " + quote_excerpt(keyword) + " (expected plan, tensor or op)");
    }
  }
  if (!header) throw UserError(source + ": empty plan (expected 'plan devices=N')");
  return p;
}

}  // namespace cleave::plan
