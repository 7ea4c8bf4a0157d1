// One program for ranks that differ only in constants (shared_program.h).
#include "codegen/shared_program.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string_view>

namespace cleave::codegen {
namespace {

/** A token of a generated source. The sources are ours (emit_bundle.cpp), so this is the subset of C++ they use:
 *  no raw strings, no digraphs; a multi-character operator is several punctuation tokens, which compares the same. */
struct Token {
  enum class Kind { space, comment, ident, number, string, character, punct } kind;
  size_t begin = 0, end = 0;
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/** Tokens of `s`; nullopt where it holds something this subset does not cover (a raw string, an unterminated
 *  literal or comment). */
std::optional<std::vector<Token>> tokenize(const std::string &s) {
  std::vector<Token> out;
  size_t i = 0, n = s.size();
  while (i < n) {
    size_t b = i;
    char c = s[i];
    Token::Kind k;
    if (std::isspace(static_cast<unsigned char>(c))) {
      while (i < n && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      k = Token::Kind::space;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      k = Token::Kind::comment;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t e = s.find("*/", i + 2);
      if (e == std::string::npos) return std::nullopt;
      i = e + 2;
      k = Token::Kind::comment;
    } else if (c == '"' || c == '\'') {
      if (c == '"' && i > 0 && ident_char(s[i - 1])) return std::nullopt;  // R"(...)", u8"...": not ours
      ++i;
      while (i < n && s[i] != c) i += s[i] == '\\' ? 2 : 1;
      if (i >= n) return std::nullopt;
      ++i;
      k = c == '"' ? Token::Kind::string : Token::Kind::character;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      // A pp-number: digits, letters, '.', and a sign right after an exponent (e/E in decimal, p/P in hex).
      bool hex = c == '0' && i + 1 < n && (s[i + 1] == 'x' || s[i + 1] == 'X');
      ++i;
      while (i < n) {
        char d = s[i];
        char prev = s[i - 1];
        bool exponent = hex ? (prev == 'p' || prev == 'P') : (prev == 'e' || prev == 'E');
        if (ident_char(d) || d == '.' || d == '\'' || ((d == '+' || d == '-') && exponent)) ++i;
        else break;
      }
      k = Token::Kind::number;
    } else if (ident_char(c)) {
      while (i < n && ident_char(s[i])) ++i;
      k = Token::Kind::ident;
    } else {
      ++i;
      k = Token::Kind::punct;
    }
    out.push_back({k, b, i});
  }
  return out;
}

/** The C++ type of a table holding a literal's values in every rank; "" when they do not share one. */
std::string literal_type(const std::vector<std::string> &texts, Token::Kind kind) {
  if (kind == Token::Kind::string) return "const char *const";
  if (kind == Token::Kind::character) return "char";
  if (kind == Token::Kind::ident) {  // true / false
    for (const std::string &t : texts)
      if (t != "true" && t != "false") return "";
    return "bool";
  }
  // Numbers: every rank's of one kind (integer or floating) and suffix.
  std::string type;
  bool fits_int = true;  // in int (unsigned int for a u suffix), the type of an integer literal without l
  for (const std::string &t : texts) {
    bool hex = t.size() > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
    bool floating = hex ? t.find_first_of("pP") != std::string::npos
                        : t.find_first_of(".eE") != std::string::npos;
    std::string suffix;
    std::string this_type;
    if (floating) {
      char last = t.back();
      this_type = last == 'f' || last == 'F' ? "float" : last == 'l' || last == 'L' ? "long double" : "double";
    } else {
      size_t e = t.size();
      while (e > 0 && std::string("uUlL").find(t[e - 1]) != std::string::npos) --e;
      for (size_t j = e; j < t.size(); ++j) suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(t[j])));
      bool u = suffix.find('u') != std::string::npos;
      size_t longs = static_cast<size_t>(std::count(suffix.begin(), suffix.end(), 'l'));
      this_type = std::string(u ? "unsigned " : "") + (longs == 2 ? "long long" : longs == 1 ? "long" : "int");
      if (t.find('\'') != std::string::npos || (t.size() > 1 && t[0] == '0' && !hex)) return "";  // not ours
      fits_int = fits_int && std::strtoull(t.substr(0, e).c_str(), nullptr, 0) <= (u ? 4294967295ull : 2147483647ull);
    }
    if (!type.empty() && type != this_type) return "";
    type = this_type;
  }
  // An unsuffixed integer too large for int is a long (LP64), as the literal itself would be.
  if (type == "int" && !fits_int) type = "long";
  if (type == "unsigned int" && !fits_int) type = "unsigned long";
  return type;
}

enum class Scope { file, function, device };

}  // namespace

std::optional<std::string> merge_rank_sources(const std::vector<std::string> &sources) {
  if (sources.empty()) return std::nullopt;
  std::vector<std::vector<Token>> toks;
  for (const std::string &s : sources) {
    auto t = tokenize(s);
    if (!t) return std::nullopt;
    toks.push_back(std::move(*t));
  }
  // The significant tokens of each source, and the text between them (spacing and comments).
  auto significant = [](const std::vector<Token> &t) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].kind != Token::Kind::space && t[i].kind != Token::Kind::comment) idx.push_back(i);
    return idx;
  };
  std::vector<std::vector<size_t>> sig;
  for (const auto &t : toks) sig.push_back(significant(t));
  for (const auto &s : sig)
    if (s.size() != sig[0].size()) return std::nullopt;
  const std::string &src = sources[0];
  auto text = [&](size_t rank, size_t k) {
    const Token &t = toks[rank][sig[rank][k]];
    return std::string_view(sources[rank]).substr(t.begin, t.end - t.begin);
  };
  // The tokens [from, to) between significant tokens k - 1 and k (k = size: after the last).
  auto gap = [&](size_t rank, size_t k) {
    return std::pair<size_t, size_t>{k == 0 ? 0 : sig[rank][k - 1] + 1,
                                     k < sig[rank].size() ? sig[rank][k] : toks[rank].size()};
  };
  auto comments_between = [&](size_t rank, size_t k) {
    auto [from, to] = gap(rank, k);
    std::string c;
    for (size_t i = from; i < to; ++i)
      if (toks[rank][i].kind == Token::Kind::comment)
        c += sources[rank].substr(toks[rank][i].begin, toks[rank][i].end - toks[rank][i].begin) + "\n";
    return c;
  };

  std::vector<Scope> scopes = {Scope::file};
  bool device_next = false;
  // main()'s statements before `rank_index = ...` run before the rank is known: file scope for this purpose.
  bool in_main = false, rank_known = false;
  std::map<std::pair<std::string, std::vector<std::string>>, int> tables;  // (type, values) -> k
  std::vector<std::string> table_decls;
  std::map<size_t, std::string> replace;  // token index in source 0 -> replacement text ("" drops a comment)
  for (size_t k = 0; k <= sig[0].size(); ++k) {
    std::string comments = comments_between(0, k);
    bool same_comments = true;
    for (size_t r = 1; r < sources.size() && same_comments; ++r) same_comments = comments_between(r, k) == comments;
    if (!same_comments) {
      auto [from, to] = gap(0, k);
      for (size_t i = from; i < to; ++i)
        if (toks[0][i].kind == Token::Kind::comment) replace[i] = "";
    }
    if (k == sig[0].size()) break;
    const Token &t = toks[0][sig[0][k]];
    std::string_view t0 = text(0, k);
    bool same = true;
    for (size_t r = 1; r < sources.size(); ++r) same = same && toks[r][sig[r][k]].kind == t.kind && text(r, k) == t0;
    if (!same) {
      bool literal = t.kind == Token::Kind::number || t.kind == Token::Kind::string ||
                     t.kind == Token::Kind::character || (t.kind == Token::Kind::ident && (t0 == "true" || t0 == "false"));
      if (!literal || scopes.back() != Scope::function || (in_main && !rank_known)) return std::nullopt;
      std::vector<std::string> values;
      for (size_t r = 0; r < sources.size(); ++r) {
        if (toks[r][sig[r][k]].kind != t.kind) return std::nullopt;
        values.emplace_back(text(r, k));
      }
      // Adjacent string literals concatenate: one of them cannot become a table lookup.
      if (t.kind == Token::Kind::string &&
          ((k > 0 && toks[0][sig[0][k - 1]].kind == Token::Kind::string) ||
           (k + 1 < sig[0].size() && toks[0][sig[0][k + 1]].kind == Token::Kind::string)))
        return std::nullopt;
      std::string type = literal_type(values, t.kind);
      if (type.empty()) return std::nullopt;
      auto [it, fresh] = tables.try_emplace({type, values}, static_cast<int>(tables.size()));
      if (fresh) {
        std::string decl = (type.rfind("const ", 0) == 0 ? "" : "const ") + type + " rank_v" +
                           std::to_string(it->second) + "[] = {";
        for (size_t r = 0; r < values.size(); ++r) decl += (r ? ", " : "") + values[r];
        table_decls.push_back(decl + "};\n");
      }
      replace[sig[0][k]] = "rank_v" + std::to_string(it->second) + "[" + kRankIndex + "]";
      continue;
    }
    // Scopes: a brace opens a host function body after `)` (or `) const`) at file scope, a device function after
    // CLEAVE_HD, and otherwise a scope of the kind it is in (blocks, braced initializers, host lambdas inside
    // functions; namespaces and file-scope initializers stay file scope).
    if (t.kind == Token::Kind::ident && t0 == "CLEAVE_HD") device_next = true;
    if (t.kind == Token::Kind::ident && t0 == "main" && scopes.size() == 1) in_main = true;
    if (in_main && t0 == kRankIndex && k + 1 < sig[0].size() && text(0, k + 1) == "=") rank_known = true;
    if (t0 == "{") {
      Scope s = scopes.back();
      if (device_next || s == Scope::device) s = Scope::device;
      else if (s == Scope::file && k > 0 && (text(0, k - 1) == ")" || text(0, k - 1) == "const")) s = Scope::function;
      device_next = false;
      scopes.push_back(s);
    } else if (t0 == "}") {
      if (scopes.size() < 2) return std::nullopt;
      scopes.pop_back();
    }
  }
  if (scopes.size() != 1) return std::nullopt;

  // Source 0 with the replacements; a dropped comment takes the spacing before it on its line, and its line when
  // nothing else is left there.
  std::string out;
  size_t at = 0;
  for (const auto &[i, with] : replace) {
    const Token &t = toks[0][i];
    out += src.substr(at, t.begin - at);
    at = t.end;
    if (with.empty() && src.compare(t.begin, 2, "/*") == 0) {
      out += ' ';  // a block comment may separate two tokens
    } else if (with.empty()) {
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      if ((out.empty() || out.back() == '\n') && at < src.size() && src[at] == '\n') ++at;
    }
    out += with;
  }
  out += src.substr(at);
  // The tables, right after the declaration of the rank they are read by.
  const std::string decl = std::string("int ") + kRankIndex + " = 0;";
  size_t d = out.find(decl);
  if (d == std::string::npos) return std::nullopt;
  size_t line_end = out.find('\n', d);
  if (line_end == std::string::npos) return std::nullopt;
  std::string all;
  for (const std::string &s : table_decls) all += s;
  out.insert(line_end + 1, all);
  return out;
}

}  // namespace cleave::codegen
