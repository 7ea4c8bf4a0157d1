// Finite-difference checks of the gradient rules of the index and scan kinds: CumSum (a cumsum of dY the other way
// round), Mod (dA = dY, dB = -dY * trunc or floor of A / B, broadcast), OneHot (its values), and ArgMax/ArgMin, whose
// int64 output carries no gradient but sits in the graph the loss is differentiated through; GatherElements (a
// scatter-add back), ScatterElements (data and updates, none and add) and GatherND (GatherNDGrad), with repeated and
// negative indices.
#include <gtest/gtest.h>

#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

TEST(GradCheck, CumSum) {
  int seed = 4000;
  for (const Shape &shape : std::vector<Shape>{{3, 5}, {2, 4, 3}})
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis)
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1}) {
          GraphBuilder b(++seed);
          TensorId x = b.input(shape);
          TensorId y = b.op(OpKind::CumSum, {x}, {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}});
          check_gradients(b, {y}, {x},
                          "CumSum" + shape_str(shape) + " axis " + std::to_string(axis) +
                              (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
        }
}

TEST(GradCheck, Mod) {
  int seed = 4100;
  for (int64_t fmod : {0, 1})
    for (const Shape &bshape : std::vector<Shape>{{3, 4}, {4}, {}}) {
      GraphBuilder b(++seed);
      TensorId a = b.input({3, 4}, -3, 3);
      // Divisors of both signs, away from 0; central differences of 1e-6 cross a jump of the result with negligible
      // probability.
      TensorId d = b.input(bshape, 0.6, 1.4);
      TensorId sign = b.input(bshape, -1, 1);
      TensorId bdiv = b.op(OpKind::Mul, {d, b.op(OpKind::Sign, {sign})});
      TensorId y = b.op(OpKind::Mod, {a, bdiv}, {{"fmod", fmod}});
      check_gradients(b, {y}, {a, d}, "Mod fmod " + std::to_string(fmod) + " B" + shape_str(bshape));
    }
}

TEST(GradCheck, OneHotValues) {
  int seed = 4200;
  for (int64_t axis : {0, 1, 2}) {
    GraphBuilder b(++seed);
    TensorId ind = b.ints({3, 4}, {0, 1, -1, 4, 2, -5, 3, 7, -6, 0, 1, 2});
    TensorId values = b.input({2});
    TensorId y = b.op(OpKind::OneHot, {ind, values}, {{"axis", axis}, {"depth", int64_t{5}}});
    check_gradients(b, {y}, {values}, "OneHot axis " + std::to_string(axis));
  }
}

TEST(GradCheck, ArgMaxArgMinInTheGraph) {
  // Y = X * float(ArgMax(X)): the positions are constants to the loss; dX = dY * position.
  int seed = 4300;
  for (OpKind kind : {OpKind::ArgMax, OpKind::ArgMin}) {
    GraphBuilder b(++seed);
    TensorId x = b.input({3, 5});
    TensorId pos = b.op(kind, {x}, {{"axis", int64_t{1}}, {"keepdims", int64_t{1}}, {"select_last_index", int64_t{0}}});
    TensorId y = b.op(OpKind::Mul, {x, b.op(OpKind::Cast, {pos}, {{"to", std::string("f64")}})});
    check_gradients(b, {y}, {x}, std::string(op_kind_name(kind)) + " in the graph");
  }
}

TEST(GradCheck, GatherElements) {
  int seed = 4400;
  {
    GraphBuilder b(++seed);
    TensorId data = b.input({4, 5});
    // Along axis 0, indices smaller than data on dim 1; repeats and negative indices.
    TensorId ind = b.ints({3, 4}, {0, 1, -1, 3, 0, 0, 2, -4, 3, 1, 1, 0});
    check_gradients(b, {b.op(OpKind::GatherElements, {data, ind}, {{"axis", int64_t{0}}})}, {data},
                    "GatherElements axis 0");
  }
  {
    GraphBuilder b(++seed);
    TensorId data = b.input({2, 3, 4});
    TensorId ind = b.ints({2, 2, 6}, {0, 1, 2, 3, 3, 3, -1, -2, 0, 0, 1, 2, 2, 2, 2, 1, 0, -4, 3, 1, 0, 1, 2, 3});
    check_gradients(b, {b.op(OpKind::GatherElements, {data, ind}, {{"axis", int64_t{2}}})}, {data},
                    "GatherElements axis 2");
  }
}

TEST(GradCheck, ScatterElements) {
  int seed = 4500;
  for (const std::string reduction : {"none", "add"}) {
    GraphBuilder b(++seed);
    TensorId data = b.input({4, 5});
    TensorId upd = b.input({3, 2});
    // Along axis 1: distinct targets per row without a reduction (one written negative), repeats with add.
    TensorId ind = reduction == "none" ? b.ints({3, 2}, {4, 0, -1, 2, 1, 3}) : b.ints({3, 2}, {4, 4, -1, 2, 1, -4});
    TensorId y = b.op(OpKind::ScatterElements, {data, ind, upd}, {{"axis", int64_t{1}}, {"reduction", reduction}});
    check_gradients(b, {y}, {data, upd}, "ScatterElements axis 1 " + reduction);
  }
  GraphBuilder b(++seed);
  TensorId data = b.input({3, 2, 2});
  TensorId upd = b.input({2, 2, 2});
  TensorId ind = b.ints({2, 2, 2}, {0, 2, -1, 1, 2, 0, 0, 2});
  TensorId y = b.op(OpKind::ScatterElements, {data, ind, upd}, {{"axis", int64_t{0}}, {"reduction", "none"}});
  check_gradients(b, {y}, {data, upd}, "ScatterElements axis 0 none");
}

TEST(GradCheck, GatherND) {
  int seed = 4600;
  {
    GraphBuilder b(++seed);
    TensorId data = b.input({4, 3, 2});
    // Five [row, col] tuples, one repeated, negative coordinates among them: slices of 2.
    TensorId ind = b.ints({5, 2}, {0, 1, 3, -1, 0, 1, -4, 2, 2, 0});
    check_gradients(b, {b.op(OpKind::GatherND, {data, ind}, {{"batch_dims", int64_t{0}}})}, {data},
                    "GatherND batch_dims 0");
  }
  {
    GraphBuilder b(++seed);
    TensorId data = b.input({3, 4, 2});
    TensorId ind = b.ints({3, 2, 1}, {0, 3, -1, -1, 2, 1});
    check_gradients(b, {b.op(OpKind::GatherND, {data, ind}, {{"batch_dims", int64_t{1}}})}, {data},
                    "GatherND batch_dims 1");
  }
  {
    GraphBuilder b(++seed);
    TensorId data = b.input({2, 3, 4});
    TensorId ind = b.ints({2, 2}, {1, -1, 0, 2});  // one full-depth tuple per batch: no tuple dims to sum
    check_gradients(b, {b.op(OpKind::GatherND, {data, ind}, {{"batch_dims", int64_t{1}}})}, {data},
                    "GatherND batch_dims 1 full depth");
  }
}

}  // namespace
}  // namespace cleave::testing
