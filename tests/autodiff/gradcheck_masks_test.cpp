// Finite-difference checks of the gradient rules of the mask, selection, padding and layer-norm kinds (the ops torch
// exports for attention masks, GELU/LayerNorm blocks and padded pools).
#include <gtest/gtest.h>

#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(GradCheck, WhereWithComparisonMasks) {
  // cond = Less(x, t): the comparison carries no gradient, x still gets one through the selected branch.
  const std::vector<std::vector<Shape>> shapes = {
      {{2, 3}, {2, 3}, {2, 3}}, {{3, 1}, {1, 4}, {3, 4}}, {{4}, {2, 4}, {}}, {{2, 1, 3}, {3}, {2, 2, 1}}};
  int seed = 2000;
  for (const auto &s : shapes) {
    GraphBuilder b(++seed);
    TensorId x = b.input(s[1]), y = b.input(s[2]), t = b.input(s[0]);
    TensorId cond = b.op(OpKind::Less, {t, b.input({}, -0.1, 0.1)});
    TensorId z = b.op(OpKind::Where, {cond, x, y});
    check_gradients(b, {z}, {x, y}, "Where" + shape_str(s[0]) + shape_str(s[1]) + shape_str(s[2]));
  }
  // A mask built with Not/And/Or/Xor/Equal still routes the gradient of both branches.
  GraphBuilder b(2010);
  TensorId x = b.input({3, 4}), y = b.input({3, 4});
  TensorId m1 = b.op(OpKind::Greater, {x, y}), m2 = b.op(OpKind::LessOrEqual, {x, b.input({4})});
  TensorId m = b.op(OpKind::Xor, {b.op(OpKind::Or, {b.op(OpKind::Not, {m1}), m2}),
                                  b.op(OpKind::And, {m1, b.op(OpKind::GreaterOrEqual, {y, b.input({3, 1})})})});
  m = b.op(OpKind::Or, {m, b.op(OpKind::Equal, {x, y})});
  check_gradients(b, {b.op(OpKind::Where, {m, b.op(OpKind::Mul, {x, y}), y})}, {x, y}, "Where logic chain");
}

TEST(GradCheck, CastReciprocalAndMasksFromCasts) {
  GraphBuilder b(2100);
  TensorId x = b.input({2, 5}, 0.5, 2.0);
  TensorId r = b.op(OpKind::Reciprocal, {x});
  // A float mask (Cast of a comparison) multiplied in, as torch's masked_fill exports do.
  TensorId mask = b.op(OpKind::Cast, {b.op(OpKind::Greater, {x, b.input({5}, 0.9, 1.1)})}, {{"to", std::string("f64")}});
  TensorId y = b.op(OpKind::Cast, {b.op(OpKind::Mul, {r, mask})}, {{"to", std::string("f64")}});
  check_gradients(b, {y, r}, {x}, "Reciprocal * Cast(mask)");
}

TEST(GradCheck, MaxMinVariadic) {
  const std::vector<std::vector<Shape>> shapes = {{{2, 3}}, {{2, 3}, {2, 3}}, {{2, 3}, {3}, {2, 1}}, {{4}, {3, 1}}};
  int seed = 2200;
  for (OpKind kind : {OpKind::Max, OpKind::Min})
    for (const auto &s : shapes) {
      GraphBuilder b(++seed);
      std::vector<TensorId> xs;
      for (const Shape &sh : s) xs.push_back(b.input(sh));
      check_gradients(b, {b.op(kind, xs)}, xs, std::string(op_kind_name(kind)) + " of " + std::to_string(s.size()));
    }
}

TEST(GradCheck, ReduceMaxMin) {
  int seed = 2300;
  for (OpKind kind : {OpKind::ReduceMax, OpKind::ReduceMin})
    for (const Ints &axes : {Ints{1}, Ints{0, 2}, Ints{0, 1, 2}})
      for (int64_t keepdims : {0, 1}) {
        GraphBuilder b(++seed);
        TensorId x = b.input({2, 3, 4});
        check_gradients(b, {b.op(kind, {x}, {{"axes", axes}, {"keepdims", keepdims}})}, {x},
                        std::string(op_kind_name(kind)) + " keepdims " + std::to_string(keepdims));
      }
}

TEST(GradCheck, PadConstant) {
  for (const Ints &pads : {Ints{1, 0, 2, 0, 1, 2}, Ints{0, -1, 1, 1, 0, -2}, Ints{-1, 2, 0, 0, 0, 1}}) {
    GraphBuilder b(2400 + pads[1]);
    TensorId x = b.input({3, 4, 5});
    check_gradients(b, {b.op(OpKind::Pad, {x}, {{"pads", pads}, {"value", 0.7}})}, {x}, "Pad" + shape_str(pads));
  }
}

TEST(GradCheck, LayerNormalization) {
  int seed = 2500;
  for (const auto &[shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{4, 6}, 1}, {{2, 3, 4}, 2}, {{2, 3, 4}, 1}, {{3, 5}, 0}})
    for (bool bias : {true, false})
      for (bool stats : {false, true}) {
        GraphBuilder b(++seed);
        TensorId x = b.input(shape, -2, 2);
        TensorId scale = b.input(Shape(shape.begin() + axis, shape.end()), 0.5, 1.5);
        std::vector<TensorId> ins = {x, scale};
        if (bias) ins.push_back(b.input(Shape(shape.begin() + axis, shape.end())));
        std::vector<TensorId> ys = b.op_multi(OpKind::LayerNormalization, ins, {{"axis", axis}, {"epsilon", 1e-5}},
                                              {true, stats, stats});
        check_gradients(b, {ys[0]}, ins,
                        "LayerNormalization" + shape_str(shape) + " axis " + std::to_string(axis) +
                            (bias ? " +B" : "") + (stats ? " +stats" : ""));
      }
}

TEST(GradCheck, GeluErfChainWithLayerNorm) {
  // BERT's block as torch 1.13 exports it: LayerNorm, then GELU = x * 0.5 * (1 + erf(x / sqrt 2)).
  GraphBuilder b(2600);
  TensorId x = b.input({3, 8}, -2, 2), scale = b.input({8}, 0.5, 1.5), bias = b.input({8});
  TensorId h = b.op(OpKind::LayerNormalization, {x, scale, bias}, {{"axis", int64_t{1}}, {"epsilon", 1e-5}});
  TensorId e = b.op(OpKind::Erf, {b.op(OpKind::Div, {h, b.input({}, 1.414, 1.415)})});
  TensorId g = b.op(OpKind::Mul, {b.op(OpKind::Mul, {h, b.op(OpKind::Add, {e, b.input({}, 1.0, 1.0001)})}),
                                  b.input({}, 0.5, 0.5001)});
  check_gradients(b, {g}, {x, scale, bias}, "LayerNorm + GELU");
}

}  // namespace
}  // namespace cleave::testing
