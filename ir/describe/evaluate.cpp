// The description evaluator: a direct reading of the semantics stated in description.h, written to be obviously
// correct, not fast.
#include "ir/describe/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/float16.h"

namespace cleave::describe {
namespace {

class Evaluator {
 public:
  Evaluator(const Description &d, const std::vector<EvalInput> &inputs, int64_t step)
      : d_(d), inputs_(inputs), step_(step), vals_(d.vars.size(), 0) {}

  std::vector<double> run() {
    std::vector<double> out(static_cast<size_t>(num_elements(d_.output_shape)), 0.0);
    std::vector<int> outs, reds;
    for (size_t i = 0; i < d_.vars.size(); ++i) {
      CLEAVE_CHECK(d_.vars[i].role != VarRole::internal, "evaluating a description with internal var ",
                   d_.vars[i].name);
      (d_.vars[i].role == VarRole::output ? outs : reds).push_back(static_cast<int>(i));
    }
    for_each(outs, 0, [&] {
      double r = reduce(reds);
      if (d_.post) {
        reduced_ = r;
        r = eval(d_.post);
      }
      int64_t flat = 0;
      for (size_t k = 0; k < d_.output_index.size(); ++k) {
        int64_t i = affine(d_.output_index[k]);
        CLEAVE_CHECK(i >= 0 && i < d_.output_shape[k], "output index out of range in ", d_.output_name);
        flat = flat * d_.output_shape[k] + i;
      }
      out[static_cast<size_t>(flat)] = r;
    });
    return out;
  }

 private:
  template <typename F>
  void for_each(const std::vector<int> &vars, size_t k, const F &f) {
    if (k == vars.size()) return f();
    int v = vars[k];
    for (int64_t i = 0; i < d_.vars[static_cast<size_t>(v)].extent; ++i) {
      vals_[static_cast<size_t>(v)] = i;
      for_each(vars, k + 1, f);
    }
  }

  double reduce(const std::vector<int> &reds) {
    if (d_.reduce == Reduce::none) return eval(d_.body);
    double acc = d_.reduce == Reduce::max || d_.reduce == Reduce::argmax ? -std::numeric_limits<double>::infinity() : 0;
    int64_t count = 0, best = -1;
    for_each(reds, 0, [&] {
      all_in_range_ = true;
      last_flat_ = -1;
      double v = eval(d_.body);
      switch (d_.reduce) {
        case Reduce::sum: acc += v; break;
        case Reduce::max: acc = std::max(acc, v); break;
        case Reduce::argmax:
          // First maximum among in-range taps (ONNX/torch tie-breaking).
          if (last_flat_ >= 0 && all_in_range_ && (best < 0 || v > acc)) {
            acc = v;
            best = last_flat_;
          }
          break;
        case Reduce::mean:
          if (all_in_range_) {
            acc += v;
            ++count;
          }
          break;
        case Reduce::none: break;
      }
    });
    if (d_.reduce == Reduce::argmax) return static_cast<double>(best);
    if (d_.reduce == Reduce::mean) return count ? acc / static_cast<double>(count) : 0.0;
    return acc;
  }

  int64_t affine(const Affine &a) const {
    int64_t r = a.constant;
    for (const auto &[v, c] : a.terms) r += c * vals_[static_cast<size_t>(v)];
    return r;
  }

  double access(const Expr &e) {
    const EvalInput &in = inputs_.at(static_cast<size_t>(e.slot));
    CLEAVE_CHECK(in.data != nullptr, "no value for operand ", e.name);
    CLEAVE_CHECK(in.shape.size() == e.index.size(), "rank of operand ", e.name);
    int64_t flat = 0;
    bool inside = true;
    for (size_t k = 0; k < e.index.size(); ++k) {
      const Index &ix = e.index[k];
      int64_t i = affine(ix.affine), dim = in.shape[k];
      if (ix.indirect) {
        int64_t j = static_cast<int64_t>(eval(ix.indirect));
        if (j < 0) j += dim;  // ONNX Gather: negative indices count from the end
        i += j;
      }
      if (ix.div != 1) {
        if (i % ix.div != 0) inside = false;
        i /= ix.div;
      }
      if (i < 0 || i >= dim) inside = false;
      flat = flat * dim + i;
    }
    if (!inside) {
      all_in_range_ = false;
      return e.pad;
    }
    if (last_flat_ < 0) last_flat_ = flat;
    return (*in.data)[static_cast<size_t>(flat)];
  }

  double eval(const ExprPtr &e) {
    switch (e->kind) {
      case Expr::Kind::constant: return e->value;
      case Expr::Kind::step_count: return static_cast<double>(step_);
      case Expr::Kind::var_value: return static_cast<double>(affine(e->affine));
      case Expr::Kind::reduced: return reduced_;
      case Expr::Kind::access: return access(*e);
      case Expr::Kind::call: break;
    }
    if (e->fn == Fn::where) return eval(e->args[0]) != 0 ? eval(e->args[1]) : eval(e->args[2]);
    double a = eval(e->args[0]);
    double b = e->args.size() > 1 ? eval(e->args[1]) : 0;
    switch (e->fn) {
      case Fn::add: return a + b;
      case Fn::sub: return a - b;
      case Fn::mul: return a * b;
      case Fn::div: return a / b;
      case Fn::pow: return std::pow(a, b);
      case Fn::neg: return -a;
      case Fn::exp: return std::exp(a);
      case Fn::log: return std::log(a);
      case Fn::sqrt: return std::sqrt(a);
      case Fn::erf: return std::erf(a);
      case Fn::relu: return a <= 0 ? 0 : a;  // NaN stays NaN, as torch.relu
      case Fn::sigmoid: return 1 / (1 + std::exp(-a));
      case Fn::tanh: return std::tanh(a);
      case Fn::step: return a > 0 ? 1 : 0;
      case Fn::abs: return std::fabs(a);
      case Fn::floor: return std::floor(a);
      case Fn::ceil: return std::ceil(a);
      case Fn::round: return std::nearbyint(a);
      case Fn::sign: return a > 0 ? 1 : a < 0 ? -1 : 0;
      case Fn::round_bf16: return double_from_bf16_bits(bf16_bits_from_double(a));
      case Fn::round_fp16: return double_from_f16_bits(f16_bits_from_double(a));
      case Fn::sin: return std::sin(a);
      case Fn::cos: return std::cos(a);
      case Fn::tan: return std::tan(a);
      case Fn::asin: return std::asin(a);
      case Fn::acos: return std::acos(a);
      case Fn::atan: return std::atan(a);
      case Fn::sinh: return std::sinh(a);
      case Fn::cosh: return std::cosh(a);
      case Fn::asinh: return std::asinh(a);
      case Fn::acosh: return std::acosh(a);
      case Fn::atanh: return std::atanh(a);
      case Fn::max: return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
      case Fn::min: return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
      case Fn::eq: return a == b ? 1 : 0;
      case Fn::where:
      case Fn::opaque: break;
    }
    CLEAVE_CHECK(false, "cannot evaluate ", fn_name(e->fn), " ", e->name);
    return 0;
  }

  const Description &d_;
  const std::vector<EvalInput> &inputs_;
  int64_t step_;
  std::vector<int64_t> vals_;
  double reduced_ = 0;
  bool all_in_range_ = true;
  int64_t last_flat_ = -1;  // flat index of the first in-range access of the current body evaluation
};

}  // namespace

std::vector<double> evaluate(const Description &d, const std::vector<EvalInput> &inputs, int64_t step) {
  CLEAVE_CHECK(is_evaluable(d), "description of ", d.output_name, " is not evaluable");
  return Evaluator(d, inputs, step).run();
}

}  // namespace cleave::describe
