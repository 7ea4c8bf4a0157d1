// to_string of descriptions: one line, index notation, loop extents and opaque vars.
#include <cstdio>
#include <sstream>

#include "ir/describe/description.h"
#include "ir/error.h"

namespace cleave::describe {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

const char *reduce_name(Reduce r) {
  switch (r) {
    case Reduce::none: return "";
    case Reduce::sum: return "sum";
    case Reduce::max: return "max";
    case Reduce::argmax: return "argmax";
    case Reduce::mean: return "mean";
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(const Description &d) : d_(d) {}

  std::string reduction_prefix() const {
    if (d_.reduce == Reduce::none) return "";
    std::string s = std::string(reduce_name(d_.reduce)) + "(";
    bool first = true;
    for (const LoopVar &v : d_.vars) {
      if (v.role != VarRole::reduction) continue;
      s += (first ? "" : ",") + v.name;
      first = false;
    }
    return s + ")";
  }

  // Precedence: 1 = + -, 2 = * /, 3 = unary minus, 4 = atoms and calls.
  std::string expr(const ExprPtr &e, int ctx_prec) const {
    switch (e->kind) {
      case Expr::Kind::constant: {
        std::string s = number(e->value);
        return e->value < 0 && ctx_prec > 1 ? "(" + s + ")" : s;
      }
      case Expr::Kind::step_count: return "t";
      case Expr::Kind::var_value: {
        std::string s = to_string(e->affine, d_.vars);
        return e->affine.terms.size() + (e->affine.constant != 0) > 1 && ctx_prec > 1 ? "(" + s + ")" : s;
      }
      case Expr::Kind::reduced: {
        std::string body = expr(d_.body, 0);
        return reduction_prefix() + "(" + body + ")";
      }
      case Expr::Kind::access: return access(*e);
      case Expr::Kind::call: return call(*e, ctx_prec);
    }
    return "?";
  }

  std::string access(const Expr &e) const {
    std::string s = e.name + "[";
    for (size_t i = 0; i < e.index.size(); ++i) {
      const Index &ix = e.index[i];
      if (i) s += ",";
      std::string part;
      if (ix.indirect) {
        part = expr(ix.indirect, 0);
        if (!ix.affine.is_constant() || ix.affine.constant != 0) part += "+" + to_string(ix.affine, d_.vars);
      } else {
        part = to_string(ix.affine, d_.vars);
      }
      if (ix.div != 1) {
        bool compound = ix.affine.terms.size() + (ix.affine.constant != 0) > 1 || ix.indirect;
        part = (compound ? "(" + part + ")" : part) + "/" + std::to_string(ix.div);
      }
      s += part;
    }
    return s + "]";
  }

  std::string call(const Expr &e, int ctx_prec) const {
    int prec = 4;
    std::string s;
    switch (e.fn) {
      case Fn::add:
      case Fn::sub:
        prec = 1;
        s = expr(e.args[0], 1) + " " + fn_name(e.fn) + " " + expr(e.args[1], e.fn == Fn::sub ? 2 : 1);
        break;
      case Fn::mul:
      case Fn::div:
        prec = 2;
        s = expr(e.args[0], 2) + " " + fn_name(e.fn) + " " + expr(e.args[1], e.fn == Fn::div ? 3 : 2);
        break;
      case Fn::neg:
        prec = 3;
        s = "-" + expr(e.args[0], 3);
        break;
      default: {
        s = (e.fn == Fn::opaque ? e.name : fn_name(e.fn)) + "(";
        for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + expr(e.args[i], 0);
        s += ")";
      }
    }
    return prec < ctx_prec ? "(" + s + ")" : s;
  }

 private:
  const Description &d_;
};

/** Operands read with a padding value other than 0 (MaxPool's -inf), once each, in body order. */
void collect_pads(const ExprPtr &e, std::string &out) {
  if (!e) return;
  if (e->kind == Expr::Kind::access && e->pad != 0) {
    std::string item = e->name + "=" + number(e->pad);
    if (out.find(item) == std::string::npos) out += (out.empty() ? "" : ",") + item;
  }
  for (const ExprPtr &a : e->args) collect_pads(a, out);
  for (const Index &i : e->index) collect_pads(i.indirect, out);
}

}  // namespace

std::string to_string(const Affine &a, const std::vector<LoopVar> &vars) {
  std::string s;
  for (const auto &[v, c] : a.terms) {
    std::string name = v >= 0 && static_cast<size_t>(v) < vars.size() ? vars[static_cast<size_t>(v)].name
                                                                          : "v" + std::to_string(v);
    if (c < 0) s += s.empty() ? "-" : "-";
    else if (!s.empty()) s += "+";
    s += name;
    int64_t m = c < 0 ? -c : c;
    if (m != 1) s += "*" + std::to_string(m);
  }
  if (a.constant != 0 || s.empty()) {
    if (a.constant >= 0 && !s.empty()) s += "+";
    s += std::to_string(a.constant);
  }
  return s;
}

std::string to_string(const Description &d) {
  if (!d.body) return d.output_name + " (absent)";
  Printer p(d);
  std::ostringstream os;
  os << d.output_name << "[";
  for (size_t i = 0; i < d.output_index.size(); ++i) os << (i ? "," : "") << to_string(d.output_index[i], d.vars);
  os << "] = ";
  if (d.post) {
    os << p.expr(d.post, 0);
  } else {
    std::string prefix = p.reduction_prefix();
    os << prefix << (prefix.empty() ? "" : " ") << p.expr(d.body, 0);
  }
  os << "  {";
  for (size_t i = 0; i < d.vars.size(); ++i) os << (i ? ", " : "") << d.vars[i].name << "=" << d.vars[i].extent;
  os << "}";
  std::string opaque;
  for (const LoopVar &v : d.vars)
    if (v.opaque) opaque += (opaque.empty() ? "" : ",") + v.name;
  if (!opaque.empty()) os << " opaque(" << opaque << ")";
  std::string synced;
  for (const LoopVar &v : d.vars)
    if (v.synced) synced += (synced.empty() ? "" : ",") + v.name;
  if (!synced.empty()) os << " synced(" << synced << ")";
  std::string pads;
  collect_pads(d.body, pads);
  if (!pads.empty()) os << " pad(" << pads << ")";
  return os.str();
}

}  // namespace cleave::describe
