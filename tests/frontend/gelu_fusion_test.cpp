// torch's decomposed exact GELU (Div by sqrt 2, Erf, Add 1, Mul by x, Mul by 0.5) imports as one Gelu op
// (frontend/fuse_decomposed.h), and computes what the five nodes compute; chains that are something else stay as they
// are.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::ModelBuilder;

struct Chain {
  bool scale_by_mul = false;  // Mul(x, 1/sqrt 2) instead of Div(x, sqrt 2)
  bool swapped = false;       // Add(1, erf), Mul(a, x) and Mul(0.5, m): operands in the other order
  float half = 0.5f;
  bool erf_is_output = false;  // erf(x / sqrt 2) is also a graph output
  bool half_2d = false;        // 0.5 as a [1, 1] constant: on x of rank 1 the product has rank 2
  bool other_x = false;        // the Mul by (1 + erf) reads another tensor than x
};

/** x -> Relu-free chain as torch 1.13 exports nn.GELU() (opset 14, nodes named /act/...) -> y. */
ModelBuilder chain_model(const Chain &c) {
  ModelBuilder mb(14);
  mb.input("x", kF32, c.half_2d ? Shape{4} : Shape{2, 3, 4});
  if (c.other_x) mb.input("z", kF32, {2, 3, 4});
  auto constant = [&](const std::string &name, float v, bool two_dims = false) {
    test::float_constant(mb, "/act/" + name, name, v, two_dims ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{});
  };
  if (c.scale_by_mul) {
    constant("inv_sqrt2", static_cast<float>(std::sqrt(0.5)));
    mb.node("Mul", {"x", "inv_sqrt2"}, {"d"}, "/act/Mul_0");
  } else {
    constant("sqrt2", static_cast<float>(std::sqrt(2.0)));
    mb.node("Div", {"x", "sqrt2"}, {"d"}, "/act/Div");
  }
  mb.node("Erf", {"d"}, {"e"}, "/act/Erf");
  constant("one", 1.0f);
  mb.node("Add", c.swapped ? std::vector<std::string>{"one", "e"} : std::vector<std::string>{"e", "one"}, {"a"},
          "/act/Add");
  std::string x = c.other_x ? "z" : "x";
  mb.node("Mul", c.swapped ? std::vector<std::string>{"a", x} : std::vector<std::string>{x, "a"}, {"m"}, "/act/Mul");
  constant("half", c.half, c.half_2d);
  mb.node("Mul", c.swapped ? std::vector<std::string>{"half", "m"} : std::vector<std::string>{"m", "half"}, {"y"},
          "/act/Mul_1");
  mb.output("y", c.half_2d ? 2 : 3);
  if (c.erf_is_output) mb.output("e", 3);
  return mb;
}

TEST(GeluFusion, TorchChainIsOneOpThatComputesTheChain) {
  for (bool by_mul : {false, true})
    for (bool swapped : {false, true}) {
      Chain c;
      c.scale_by_mul = by_mul;
      c.swapped = swapped;
      Graph fused = import(chain_model(c), "gelu_fused");
      ASSERT_EQ(test::count_ops(fused, OpKind::Gelu), 1) << print_graph(fused);
      EXPECT_EQ(test::count_ops(fused, OpKind::Erf), 0) << print_graph(fused);
      EXPECT_EQ(test::count_ops(fused, OpKind::Mul), 0) << print_graph(fused);
      for (const Op &op : fused.ops())
        if (op.kind == OpKind::Gelu) {
          EXPECT_EQ(op.name, "/act/Gelu");
          EXPECT_EQ(fused.tensor(op.inputs[0]).name, "x");
          EXPECT_EQ(fused.tensor(op.outputs[0]).name, "y");
        }
      // The same chain with erf also a graph output is imported node by node: the oracle.
      c.erf_is_output = true;
      Graph chain = import(chain_model(c), "gelu_chain");
      ASSERT_EQ(test::count_ops(chain, OpKind::Gelu), 0) << print_graph(chain);
      std::vector<float> x = test::random_floats(24, 5, 4.0f);
      std::vector<double> a = test::run_forward(fused, "x", x, "y"), b = test::run_forward(chain, "x", x, "y");
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << "i " << i;
    }
}

TEST(GeluFusion, OtherChainsStayAsTheyAre) {
  Chain other;
  other.half = 0.6f;  // not a GELU
  Graph g = import(chain_model(other), "gelu_other");
  EXPECT_EQ(test::count_ops(g, OpKind::Gelu), 0);
  EXPECT_EQ(test::count_ops(g, OpKind::Erf), 1);
  Chain wide;  // a GELU's values, but the [1, 1] constant makes y [1, 4] where Gelu(x) would be [4]
  wide.half_2d = true;
  Graph w = import(chain_model(wide), "gelu_wide");
  EXPECT_EQ(test::count_ops(w, OpKind::Gelu), 0);
  EXPECT_EQ(w.tensor(*w.find_tensor("y")).shape, (Shape{1, 4}));
  Chain mixed;  // z * (1 + erf(x / sqrt 2)) / 2 is not GELU(x)
  mixed.other_x = true;
  EXPECT_EQ(test::count_ops(import(chain_model(mixed), "gelu_mixed"), OpKind::Gelu), 0);
}

}  // namespace
}  // namespace cleave
