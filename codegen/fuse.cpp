#include "codegen/fuse.h"

#include <algorithm>
#include <regex>

#include "codegen/lower.h"
#include "ir/error.h"

namespace cleave::codegen {

std::string rename_words(const std::string &expr, const std::function<std::string(const std::string &)> &rename) {
  static const std::regex word(R"(\b[A-Za-z_][A-Za-z_0-9]*\b)");
  std::string out;
  size_t last = 0;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), word); it != std::sregex_iterator(); ++it) {
    size_t pos = static_cast<size_t>(it->position());
    out += expr.substr(last, pos - last);
    // Qualified names (std::exp) and float suffixes are not parameters.
    bool qualified = pos >= 2 && expr.compare(pos - 2, 2, "::") == 0;
    bool literal = pos >= 1 && (std::isdigit(static_cast<unsigned char>(expr[pos - 1])) || expr[pos - 1] == '.');
    out += qualified || literal ? it->str() : rename(it->str());
    last = pos + static_cast<size_t>(it->length());
  }
  return out + expr.substr(last);
}


MapSpec elementwise(int64_t n, const std::string &expr, const std::vector<std::string> &ins, const std::string &out) {
  MapSpec s;
  s.n = n;
  s.out = out;
  std::vector<int> param;  // operand -> parameter (operands naming the same buffer share one)
  for (const std::string &in : ins) {
    auto it = std::find(s.ins.begin(), s.ins.end(), in);
    param.push_back(static_cast<int>(it - s.ins.begin()));
    if (it == s.ins.end()) s.ins.push_back(in);
  }
  s.lets.push_back(rename_words(expr, [&](const std::string &w) -> std::string {
    if (w.size() == 1 && w[0] >= 'a' && w[0] < 'a' + static_cast<char>(ins.size()))
      return "x" + std::to_string(param[static_cast<size_t>(w[0] - 'a')]);
    return w;
  }));
  return s;
}

bool fusable(const MapSpec &producer, const MapSpec &consumer) {
  auto reads = [&](const std::string &p) {
    return std::find(consumer.ins.begin(), consumer.ins.end(), p) != consumer.ins.end();
  };
  return producer.n == consumer.n && reads(producer.out) && consumer.block_inner == 0 &&
         (producer.block_inner == 0 || !reads(producer.ins[0]));
}

MapSpec fuse(const MapSpec &producer, const MapSpec &consumer) {
  CLEAVE_CHECK(fusable(producer, consumer), "fusing maps that do not fuse");
  MapSpec s;
  s.n = consumer.n;
  s.out = consumer.out;
  s.ins = producer.ins;
  s.block_inner = producer.block_inner;  // the block operand stays ins[0]
  s.block_mid = producer.block_mid;
  std::vector<std::string> consumer_param;  // consumer parameter -> name in the fused body
  for (const std::string &in : consumer.ins) {
    if (in == producer.out) {
      consumer_param.push_back("v" + std::to_string(producer.lets.size() - 1));
      continue;
    }
    auto it = std::find(s.ins.begin(), s.ins.end(), in);
    consumer_param.push_back("x" + std::to_string(it - s.ins.begin()));
    if (it == s.ins.end()) s.ins.push_back(in);
  }
  s.lets = producer.lets;
  size_t shift = producer.lets.size();
  for (const std::string &let : consumer.lets)
    s.lets.push_back(rename_words(let, [&](const std::string &w) -> std::string {
      if (w.size() > 1 && (w[0] == 'x' || w[0] == 'v') &&
          std::all_of(w.begin() + 1, w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        size_t k = std::stoul(w.substr(1));
        return w[0] == 'x' ? consumer_param[k] : "v" + std::to_string(k + shift);
      }
      return w;
    }));
  return s;
}

std::string map_code(const MapSpec &spec) {
  std::string code = spec.block_inner > 0 ? "rt::map_block(" + std::to_string(spec.n) + ", " +
                                                std::to_string(spec.block_inner) + ", " +
                                                std::to_string(spec.block_mid) + ", [] CLEAVE_HD ("
                                          : "rt::map(" + std::to_string(spec.n) + ", [] CLEAVE_HD (";
  const std::string real = real_type();
  for (size_t i = 0; i < spec.ins.size(); ++i) code += (i ? ", " : "") + real + " x" + std::to_string(i);
  code += ") {";
  for (size_t k = 0; k + 1 < spec.lets.size(); ++k)
    code += " const " + real + " v" + std::to_string(k) + " = " + spec.lets[k] + ";";
  code += " return " + spec.lets.back() + "; }, " + spec.out;
  for (const std::string &in : spec.ins) code += ", static_cast<const " + real + " *>(" + in + ")";
  return code + ");";
}

}  // namespace cleave::codegen
