// Finite-difference checks of the activation kinds' gradient rules (Clip .. Softsign, PRelu with a broadcast slope,
// Abs), on inputs that straddle each kink; Sign/Floor/Ceil/Round pass no gradient back (torch's zero gradient).
#include <gtest/gtest.h>

#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

TEST(GradCheck, Activations) {
  struct Case {
    OpKind kind;
    AttrMap attrs;
    double lo, hi;
  };
  const std::vector<Case> cases = {
      {OpKind::Clip, {{"min", -0.5}, {"max", 0.5}}, -1, 1},
      {OpKind::Clip, {{"min", 0.0}, {"max", 6.0}}, -2, 8},  // ReLU6
      {OpKind::Clip, {{"max", 0.25}}, -1, 1},
      {OpKind::HardSigmoid, {{"alpha", 1.0 / 6}, {"beta", 0.5}}, -4, 4},
      {OpKind::HardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}}, -3.5, 3.5},
      {OpKind::HardSwish, {}, -4.5, 4.5},
      {OpKind::Gelu, {}, -4, 4},
      {OpKind::LeakyRelu, {{"alpha", 0.1}}, -1, 1},
      {OpKind::Elu, {{"alpha", 1.5}}, -2, 1},
      {OpKind::Selu, {{"alpha", 1.67326319217681884765625}, {"gamma", 1.05070102214813232421875}}, -2, 1},
      {OpKind::Celu, {{"alpha", 2.0}}, -3, 1},
      {OpKind::Softplus, {}, -3, 3},
      {OpKind::Softsign, {}, -3, 3},
      {OpKind::ThresholdedRelu, {{"alpha", 0.3}}, -1, 1},
      {OpKind::Abs, {}, -1, 1},
  };
  int seed = 2400;
  for (const Case &c : cases)
    for (const Shape &s : {Shape{2, 3, 4}, Shape{7}}) {
      GraphBuilder b(++seed);
      TensorId x = b.input(s, c.lo, c.hi);
      check_gradients(b, {b.op(c.kind, {x}, c.attrs)}, {x}, std::string(op_kind_name(c.kind)) + shape_str(s));
    }
}

TEST(GradCheck, PReluSlopeBroadcast) {
  // Per-channel slope [C, 1, 1] (torch.nn.PReLU(C) as exported), one shared slope, and a full-shape slope.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4, 5}, {3, 1, 1}}, {{2, 3, 4}, {1}}, {{2, 3}, {2, 3}}, {{4, 3}, {3}}};
  int seed = 2500;
  for (const auto &[xs, ss] : shapes) {
    GraphBuilder b(++seed);
    TensorId x = b.input(xs), slope = b.input(ss, 0.05, 0.5);
    check_gradients(b, {b.op(OpKind::PRelu, {x, slope})}, {x, slope}, "PRelu" + shape_str(xs) + shape_str(ss));
  }
}

TEST(GradCheck, RoundingOpsPassNoGradient) {
  // y = Floor(x) + x etc.: the gradient of x is exactly dY (the rounding path contributes zero, as in torch).
  int seed = 2600;
  for (OpKind kind : {OpKind::Sign, OpKind::Floor, OpKind::Ceil, OpKind::Round}) {
    GraphBuilder b(++seed);
    TensorId x = b.input({3, 4}, -2.3, 2.3);
    TensorId y = b.op(OpKind::Add, {b.op(kind, {x}), x});
    check_gradients(b, {y}, {x}, std::string(op_kind_name(kind)));
  }
}

}  // namespace
}  // namespace cleave::testing
