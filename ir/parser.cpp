#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

struct Token {
  enum Kind { word, quoted, punct, end } kind = end;
  std::string text;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == ':' || c == '/' || c == '+' || c == '-';
}

/** Tokens of one line. `->` and `<-` are single punctuation tokens. */
class LineParser {
 public:
  LineParser(const std::string &line, const std::string &where) : line_(line), where_(where) {}

  [[noreturn]] void fail(const std::string &msg) const { throw UserError(where_ + ": " + msg); }
  const std::string &where() const { return where_; }

  Token next() {
    skip_space();
    Token t;
    if (pos_ >= line_.size()) return t;
    char c = line_[pos_];
    if ((c == '-' && peek(1) == '>') || (c == '<' && peek(1) == '-')) {
      t.kind = Token::punct;
      t.text = line_.substr(pos_, 2);
      pos_ += 2;
    } else if (c == '"') {
      t.kind = Token::quoted;
      ++pos_;
      while (true) {
        if (pos_ >= line_.size()) fail("unterminated string");
        char d = line_[pos_++];
        if (d == '"') break;
        if (d == '\\') {
          if (pos_ >= line_.size()) fail("unterminated string");
          d = line_[pos_++];
        }
        t.text += d;
      }
    } else if (is_word_char(c)) {
      t.kind = Token::word;
      while (pos_ < line_.size() && is_word_char(line_[pos_]) && !(line_[pos_] == '-' && peek(1) == '>'))
        t.text += line_[pos_++];
    } else {
      t.kind = Token::punct;
      t.text = std::string(1, c);
      ++pos_;
    }
    return t;
  }

  Token peek_token() {
    size_t save = pos_;
    Token t = next();
    pos_ = save;
    return t;
  }

  void expect(const std::string &punct) {
    Token t = next();
    if (t.kind != Token::punct || t.text != punct) fail("expected '" + punct + "', found '" + t.text + "'");
  }

  bool accept(const std::string &punct) {
    Token t = peek_token();
    if (t.kind == Token::punct && t.text == punct) {
      next();
      return true;
    }
    return false;
  }

  /** A name: a bare word or a quoted string. */
  std::string name(const char *what) {
    Token t = next();
    if (t.kind != Token::word && t.kind != Token::quoted) fail(std::string("expected ") + what);
    return t.text;
  }

  std::string word(const char *what) {
    Token t = next();
    if (t.kind != Token::word) fail(std::string("expected ") + what);
    return t.text;
  }

  void expect_end() {
    Token t = next();
    if (t.kind != Token::end) fail("unexpected '" + t.text + "' at end of line");
  }

  /** `[w, w, ...]` as raw words. */
  std::vector<std::string> word_list() {
    expect("[");
    std::vector<std::string> words;
    if (accept("]")) return words;
    do words.push_back(word("a number"));
    while (accept(","));
    expect("]");
    return words;
  }

 private:
  char peek(size_t k) const { return pos_ + k < line_.size() ? line_[pos_ + k] : '\0'; }
  void skip_space() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r')) ++pos_;
  }

  const std::string &line_;
  std::string where_;
  size_t pos_ = 0;
};

std::optional<int64_t> to_int(const std::string &w) {
  int64_t v = 0;
  auto res = std::from_chars(w.data(), w.data() + w.size(), v);
  if (res.ec != std::errc() || res.ptr != w.data() + w.size()) return std::nullopt;
  return v;
}

std::optional<double> to_double(const std::string &w) {
  if (w == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (w == "inf") return std::numeric_limits<double>::infinity();
  if (w == "-inf") return -std::numeric_limits<double>::infinity();
  double v = 0;
  auto res = std::from_chars(w.data(), w.data() + w.size(), v);
  if (res.ec != std::errc() || res.ptr != w.data() + w.size()) return std::nullopt;
  return v;
}

std::optional<float> to_float(const std::string &w) {
  if (w == "nan" || w == "inf" || w == "-inf") return static_cast<float>(*to_double(w));
  float v = 0;
  auto res = std::from_chars(w.data(), w.data() + w.size(), v);
  if (res.ec != std::errc() || res.ptr != w.data() + w.size()) return std::nullopt;
  return v;
}

Attr parse_attr_value(LineParser &p) {
  Token t = p.peek_token();
  if (t.kind == Token::quoted) return p.next().text;
  if (t.kind == Token::punct && t.text == "[") {
    std::vector<std::string> words = p.word_list();
    std::vector<int64_t> ints;
    for (const auto &w : words) {
      auto v = to_int(w);
      if (!v) break;
      ints.push_back(*v);
    }
    if (ints.size() == words.size()) return ints;
    std::vector<double> floats;
    for (const auto &w : words) {
      auto v = to_double(w);
      if (!v) p.fail("bad number '" + w + "' in attribute list");
      floats.push_back(*v);
    }
    return floats;
  }
  std::string w = p.word("an attribute value");
  if (auto v = to_int(w)) return *v;
  if (auto v = to_double(w)) return *v;
  p.fail("bad attribute value '" + w + "'");
}

std::vector<uint8_t> parse_data(LineParser &p, DType dtype, int64_t count) {
  std::vector<std::string> words = p.word_list();
  if (static_cast<int64_t>(words.size()) != count)
    p.fail("constant has " + std::to_string(words.size()) + " values, its shape needs " + std::to_string(count));
  if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16) {
    std::vector<double> v;
    for (const auto &w : words) {
      auto f = to_float(w);
      if (!f) p.fail("bad number '" + w + "'");
      v.push_back(*f);
    }
    return encode_doubles(dtype, v);
  }
  if (dtype == DType::f64) {
    std::vector<double> v;
    for (const auto &w : words) {
      auto f = to_double(w);
      if (!f) p.fail("bad number '" + w + "'");
      v.push_back(*f);
    }
    return encode_doubles(dtype, v);
  }
  std::vector<int64_t> v;
  for (const auto &w : words) {
    auto i = to_int(w);
    uint64_t u = 0;
    // u64 values above INT64_MAX are carried through int64 by their bits (encode_ints narrows modulo 2^64).
    if (!i && dtype == DType::u64) {
      auto res = std::from_chars(w.data(), w.data() + w.size(), u);
      if (res.ec == std::errc() && res.ptr == w.data() + w.size()) i = static_cast<int64_t>(u);
    }
    if (!i) p.fail("bad integer '" + w + "'");
    v.push_back(*i);
  }
  return encode_ints(dtype, v);
}

class GraphParser {
 public:
  explicit GraphParser(std::string source) : source_(std::move(source)) {}

  Graph parse(const std::string &text) {
    std::istringstream in(text);
    std::string line;
    int line_no = 0;
    bool saw_header = false;
    while (std::getline(in, line)) {
      ++line_no;
      LineParser p(line, source_ + ":" + std::to_string(line_no));
      Token head = p.next();
      if (head.kind == Token::end) continue;
      if (head.kind == Token::punct && head.text == "#") continue;
      if (head.kind != Token::word) p.fail("expected a keyword");
      if (!saw_header) {
        if (head.text != "graph") p.fail("expected 'graph NAME' as the first line");
        g_.name = p.name("a graph name");
        p.expect_end();
        saw_header = true;
        continue;
      }
      if (head.text == "tensor") parse_tensor(p);
      else if (head.text == "op") parse_op(p);
      else if (head.text == "output") g_.outputs.push_back(tensor_ref(p, p.name("a tensor name")));
      else if (head.text == "loss") g_.loss = tensor_ref(p, p.name("a tensor name"));
      else if (head.text == "loss_scale") {
        TensorId s = g_.loss_scaling.scale = tensor_ref(p, p.name("a tensor name"));
        // The scale's first value (optimizer state carries no data in IR text).
        if (p.word("init") != "init") p.fail("expected init=SCALE");
        p.expect("=");
        auto init = to_double(p.word("a loss scale"));
        if (!init || !(static_cast<float>(*init) > 0) || !std::isfinite(static_cast<float>(*init)))
          p.fail("the first loss scale must be a positive float32 number");
        Tensor &st = g_.tensor(s);
        st.data = encode_doubles(DType::f32, std::vector<double>(static_cast<size_t>(num_elements(st.shape)), *init));
        if (p.word("growth_interval") != "growth_interval") p.fail("expected growth_interval=N");
        p.expect("=");
        auto n = to_int(p.word("a growth interval"));
        if (!n || *n < 1) p.fail("the growth interval must be a positive integer");
        g_.loss_scaling.growth_interval = *n;
      }
      else if (head.text == "assign") {
        Assign a;
        a.dst = tensor_ref(p, p.name("a tensor name"));
        p.expect("<-");
        a.src = tensor_ref(p, p.name("a tensor name"));
        g_.assigns.push_back(a);
      } else {
        p.fail("unknown keyword '" + head.text + "'");
      }
      p.expect_end();
    }
    if (!saw_header) throw UserError(source_ + ": empty IR text (expected 'graph NAME')");
    resolve_groups();
    return std::move(g_);
  }

 private:
  TensorId tensor_ref(LineParser &p, const std::string &name) {
    auto id = g_.find_tensor(name);
    if (!id) p.fail("unknown tensor \"" + name + "\"");
    return *id;
  }

  void parse_tensor(LineParser &p) {
    Tensor t;
    t.name = p.name("a tensor name");
    std::string dtype = p.word("a dtype");
    auto dt = parse_dtype(dtype);
    if (!dt) p.fail("unknown dtype '" + dtype + "'");
    t.dtype = *dt;
    for (const auto &w : p.word_list()) {
      auto d = to_int(w);
      if (!d || *d < 0) p.fail("bad dimension '" + w + "'");
      t.shape.push_back(*d);
    }
    std::string role = p.word("a role");
    auto r = parse_role(role);
    if (!r) p.fail("unknown role '" + role + "'");
    t.role = *r;
    if (p.accept("=")) {
      if (t.role != Role::constant) p.fail("only constants carry data in IR text");
      t.data = parse_data(p, t.dtype, checked_num_elements(t.shape, "tensor \"" + t.name + "\""));
    }
    if (p.peek_token().kind == Token::word && p.peek_token().text == "external") parse_external(p, t);
    if (p.peek_token().kind == Token::word && p.peek_token().text == "zeros") {
      p.next();
      if (t.role != Role::optimizer_state) p.fail("only optimizer state starts as zeros");
      t.zero_init = true;
    }
    if (p.peek_token().kind == Token::word && p.peek_token().text == "samples") {
      p.next();
      if (!is_data(t)) p.fail("only inputs and labels have a sample axis");
      p.expect("=");
      auto axis = to_int(p.word("a sample axis"));
      if (!axis || *axis < 0 || *axis >= static_cast<int64_t>(t.shape.size()))
        p.fail("sample axis must be a dim of " + shape_str(t.shape));
      t.sample_axis = static_cast<int>(*axis);
    }
    if (g_.find_tensor(t.name)) p.fail("duplicate tensor \"" + t.name + "\"");
    g_.add_tensor(std::move(t));
  }

  /** `external("file", offset, length)`: where a param's values are (Tensor::external). */
  void parse_external(LineParser &p, Tensor &t) {
    p.next();
    if (t.role != Role::param && t.role != Role::optimizer_state) p.fail("only params reference external data");
    p.expect("(");
    Token file = p.next();
    if (file.kind != Token::quoted || file.text.empty()) p.fail("expected a quoted file name");
    ExternalData ref{file.text, 0, 0};
    p.expect(",");
    auto offset = to_int(p.word("an offset"));
    p.expect(",");
    auto length = to_int(p.word("a length"));
    p.expect(")");
    int64_t nbytes = checked_num_elements(t.shape, "tensor \"" + t.name + "\"") * dtype_size(t.dtype);
    if (!offset || *offset < 0) p.fail("external data offset must be a non-negative integer");
    if (!length || *length != nbytes)
      p.fail("external data length must be " + std::to_string(nbytes) + " (the tensor's bytes)");
    ref.offset = *offset;
    ref.length = *length;
    t.external = ref;
  }

  std::vector<TensorId> operands(LineParser &p) {
    std::vector<TensorId> ids;
    p.expect("(");
    if (p.accept(")")) return ids;
    do {
      std::string n = p.name("an operand");
      ids.push_back(n == "_" ? kNoTensor : tensor_ref(p, n));
    } while (p.accept(","));
    p.expect(")");
    return ids;
  }

  void parse_op(LineParser &p) {
    Op op;
    op.name = p.name("an op name");
    std::string kind = p.word("an op kind");
    auto k = parse_op_kind(kind);
    if (!k) p.fail("unknown op kind '" + kind + "'");
    op.kind = *k;
    std::string phase = p.word("a phase");
    auto ph = parse_phase(phase);
    if (!ph) p.fail("unknown phase '" + phase + "'");
    op.phase = *ph;
    std::string group;
    Token t = p.peek_token();
    if (t.kind == Token::word && t.text == "group") {
      p.next();
      p.expect("=");
      group = p.name("a group op name");
    }
    t = p.peek_token();
    if (t.kind == Token::word && t.text == "unroll") {
      p.next();
      p.expect("=");
      op.unroll_scope = p.name("an unroll scope name");
      if (p.word("'t=' after the unroll scope") != "t") p.fail("expected 't=' after the unroll scope");
      p.expect("=");
      std::string w = p.word("a timestep");
      auto step = to_int(w);
      if (!step || *step < 0) p.fail("bad timestep '" + w + "'");
      op.unroll_step = *step;
    }
    op.inputs = operands(p);
    p.expect("->");
    op.outputs = operands(p);
    if (p.accept("{")) {
      if (!p.accept("}")) {
        do {
          std::string key = p.word("an attribute name");
          p.expect("=");
          if (op.attrs.count(key)) p.fail("duplicate attribute '" + key + "'");
          op.attrs.emplace(key, parse_attr_value(p));
        } while (p.accept(","));
        p.expect("}");
      }
    }
    if (g_.find_op(op.name)) p.fail("duplicate op \"" + op.name + "\"");
    for (TensorId out : op.outputs)
      if (out != kNoTensor && g_.tensor(out).producer != kNoOp)
        p.fail("tensor \"" + g_.tensor(out).name + "\" already has a producer");
    OpId id = g_.add_op(std::move(op));
    if (!group.empty()) pending_groups_.push_back({id, group, p.where()});
  }

  // Groups may name ops defined later only in malformed text, but resolve after all ops for clear errors.
  struct PendingGroup {
    OpId op;
    std::string group;
    std::string where;
  };

  void resolve_groups() {
    for (auto &pg : pending_groups_) {
      auto id = g_.find_op(pg.group);
      if (!id) throw UserError(pg.where + ": unknown group op \"" + pg.group + "\"");
      g_.op(pg.op).group = *id;
    }
  }

  std::string source_;
  Graph g_;
  std::vector<PendingGroup> pending_groups_;
};

}  // namespace

Graph parse_graph(const std::string &text, const std::string &source) { return GraphParser(source).parse(text); }

}  // namespace cleave
