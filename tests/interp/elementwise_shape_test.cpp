// Elementwise, shape and reduction kernels against torch 1.13 references (make_reference.py).
#include "tests/interp/reference_data.h"

namespace cleave::interp::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(InterpTorch, BroadcastBinaryOps) {
  for (auto [name, kind] : {std::pair{"add", OpKind::Add}, std::pair{"sub", OpKind::Sub}, std::pair{"mul", OpKind::Mul},
                            std::pair{"div", OpKind::Div}}) {
    SCOPED_TRACE(name);
    Case c;
    TensorId a = c.feed("ew.a"), b = c.feed("ew.b");
    std::string r = std::string("ew.") + name;
    TensorId y = c.out_like(r);
    c.op(kind, {a, b}, {y});
    expect_matches(c.run(), y, r);
  }
}

TEST(InterpTorch, UnaryOpsAndGradients) {
  struct U {
    const char *name;
    OpKind fwd;
    std::optional<OpKind> grad;
    bool grad_reads_y;  // gradient's second operand is Y (else X)
    const char *x;      // the input inside the function's domain: un.x, un.xpos (> 0), un.xhalf (|x| < 1), un.xgt1
  };
  const U cases[] = {{"relu", OpKind::Relu, OpKind::ReluGrad, false, "un.x"},
                     {"sigmoid", OpKind::Sigmoid, OpKind::SigmoidGrad, true, "un.x"},
                     {"tanh", OpKind::Tanh, OpKind::TanhGrad, true, "un.x"},
                     {"erf", OpKind::Erf, OpKind::ErfGrad, false, "un.x"},
                     {"sqrt", OpKind::Sqrt, OpKind::SqrtGrad, true, "un.xpos"},
                     {"exp", OpKind::Exp, {}, false, "un.x"},
                     {"log", OpKind::Log, {}, false, "un.xpos"},
                     {"neg", OpKind::Neg, {}, false, "un.x"},
                     {"sin", OpKind::Sin, OpKind::SinGrad, false, "un.x"},
                     {"cos", OpKind::Cos, OpKind::CosGrad, false, "un.x"},
                     {"tan", OpKind::Tan, OpKind::TanGrad, true, "un.x"},
                     {"asin", OpKind::Asin, OpKind::AsinGrad, false, "un.xhalf"},
                     {"acos", OpKind::Acos, OpKind::AcosGrad, false, "un.xhalf"},
                     {"atan", OpKind::Atan, OpKind::AtanGrad, false, "un.x"},
                     {"sinh", OpKind::Sinh, OpKind::SinhGrad, false, "un.x"},
                     {"cosh", OpKind::Cosh, OpKind::CoshGrad, false, "un.x"},
                     {"asinh", OpKind::Asinh, OpKind::AsinhGrad, false, "un.x"},
                     {"acosh", OpKind::Acosh, OpKind::AcoshGrad, false, "un.xgt1"},
                     {"atanh", OpKind::Atanh, OpKind::AtanhGrad, false, "un.xhalf"}};
  for (const U &u : cases) {
    SCOPED_TRACE(u.name);
    std::string p = std::string("un.") + u.name;
    Case c;
    TensorId x = c.feed(u.x), dy = c.feed("un.dy");
    TensorId y = c.out_like(p + ".y");
    c.op(u.fwd, {x}, {y});
    TensorId dx = kNoTensor;
    if (u.grad) {
      dx = c.out_like(p + ".dx");
      c.op(*u.grad, {dy, u.grad_reads_y ? y : x}, {dx}, {}, Phase::backward);
    }
    Values v = c.run();
    expect_matches(v, y, p + ".y");
    if (u.grad) expect_matches(v, dx, p + ".dx", 1e-5);  // may read the float32-rounded Y
  }
}

TEST(InterpTorch, IdentityAndReshapeCopy) {
  Case c;
  TensorId x = c.feed("sh.x");
  TensorId y = c.out("y", {2, 3, 4}), r = c.out("r", {6, 4});
  c.op(OpKind::Identity, {x}, {y});
  c.op(OpKind::Reshape, {y}, {r}, {{"shape", Ints{6, 4}}});
  Values v = c.run();
  EXPECT_EQ(v[y]->data, ref_array("sh.x").data);
  EXPECT_EQ(v[r]->data, ref_array("sh.x").data);
  EXPECT_EQ(v[r]->shape, (Shape{6, 4}));
}

TEST(InterpTorch, TransposeConcatSplitExpand) {
  Case c;
  TensorId x = c.feed("sh.x"), x2 = c.feed("sh.x2"), e = c.feed("sh.e");
  TensorId t = c.out_like("sh.transpose"), cat = c.out_like("sh.concat");
  TensorId s0 = c.out_like("sh.split0"), s1 = c.out_like("sh.split1"), ex = c.out_like("sh.expand");
  c.op(OpKind::Transpose, {x}, {t}, {{"perm", Ints{2, 0, 1}}});
  c.op(OpKind::Concat, {x, x2}, {cat}, {{"axis", int64_t{1}}});
  c.op(OpKind::Split, {x}, {s0, s1}, {{"axis", int64_t{2}}, {"split", Ints{1, 3}}});
  c.op(OpKind::Expand, {e}, {ex}, {{"shape", Ints{2, 1, 4}}});
  Values v = c.run();
  expect_matches(v, t, "sh.transpose", 0.0);
  expect_matches(v, cat, "sh.concat", 0.0);
  expect_matches(v, s0, "sh.split0", 0.0);
  expect_matches(v, s1, "sh.split1", 0.0);
  expect_matches(v, ex, "sh.expand", 0.0);
}

TEST(InterpTorch, SliceGatherAndGradients) {
  Case c;
  TensorId x = c.feed("sh.x"), sdy = c.feed("sh.slice.dy"), gdy = c.feed("sh.gather.dy");
  TensorId ind = c.feed("sh.gather.indices", DType::i64);
  AttrMap slice{{"starts", Ints{1, 3}}, {"ends", Ints{3, 0}}, {"axes", Ints{1, 2}}, {"steps", Ints{1, -2}}};
  TensorId s = c.out_like("sh.slice"), sdx = c.out_like("sh.slice.dx");
  TensorId g = c.out_like("sh.gather"), gdx = c.out_like("sh.gather.dx");
  c.op(OpKind::Slice, {x}, {s}, slice);
  c.op(OpKind::SliceGrad, {sdy}, {sdx}, slice, Phase::backward);
  c.op(OpKind::Gather, {x, ind}, {g}, {{"axis", int64_t{1}}});
  c.op(OpKind::GatherGrad, {gdy, ind}, {gdx}, {{"axis", int64_t{1}}}, Phase::backward);
  Values v = c.run();
  expect_matches(v, s, "sh.slice", 0.0);
  expect_matches(v, sdx, "sh.slice.dx", 0.0);
  expect_matches(v, g, "sh.gather", 0.0);
  expect_matches(v, gdx, "sh.gather.dx");  // repeated index 2 accumulates
}

TEST(InterpTorch, ReductionsAndGlobalAveragePool) {
  Case c;
  TensorId x = c.feed("sh.x"), gx = c.feed("gap.x"), gdy = c.feed("gap.dy");
  TensorId m = c.out_like("sh.reducemean"), s = c.out_like("sh.reducesum");
  TensorId gy = c.out_like("gap.y"), gdx = c.out_like("gap.dx");
  c.op(OpKind::ReduceMean, {x}, {m}, {{"axes", Ints{0, 2}}, {"keepdims", int64_t{1}}});
  c.op(OpKind::ReduceSum, {x}, {s}, {{"axes", Ints{1}}, {"keepdims", int64_t{0}}});
  c.op(OpKind::GlobalAveragePool, {gx}, {gy});
  c.op(OpKind::GlobalAveragePoolGrad, {gdy}, {gdx}, {}, Phase::backward);
  Values v = c.run();
  expect_matches(v, m, "sh.reducemean");
  expect_matches(v, s, "sh.reducesum");
  expect_matches(v, gy, "gap.y");
  expect_matches(v, gdx, "gap.dx");
}

}  // namespace
}  // namespace cleave::interp::testing
