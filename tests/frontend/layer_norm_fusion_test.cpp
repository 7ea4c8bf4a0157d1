// torch's decomposed LayerNorm (opset < 17) imports as one LayerNormalization op (frontend/fuse_decomposed.h), and
// computes what the nine nodes compute; chains that are something else stay as they are.
#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tests/frontend/import_helpers.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::import;
using test::ModelBuilder;

struct Chain {
  Shape x{2, 3, 4};
  int k = 1;
  Shape scale{4};
  float exponent = 2.0f;
  bool bias = true;
  bool sub_is_output = false;  // d = x - mean is also a graph output
};

/** x -> Relu -> the chain as torch 1.13 exports nn.LayerNorm (opset 14, nodes named /ln/...) -> y. */
ModelBuilder chain_model(const Chain &c) {
  ModelBuilder mb(14);
  mb.input("x", kF32, c.x);
  int64_t n = 1;
  for (int64_t d : c.scale) n *= d;
  mb.init_f("ln.weight", c.scale, test::random_floats(static_cast<size_t>(n), 1, 2.0f));
  mb.init_f("ln.bias", c.scale, test::random_floats(static_cast<size_t>(n), 2, 2.0f));
  auto constant = [&](const std::string &name, float v) { test::float_constant(mb, "/ln/" + name, name, v); };
  std::vector<int64_t> axes;
  for (int i = c.k; i > 0; --i) axes.push_back(-i);
  mb.node("Relu", {"x"}, {"r"}, "/relu");
  test::set_ints(mb.node("ReduceMean", {"r"}, {"m"}, "/ln/ReduceMean"), "axes", axes);
  mb.node("Sub", {"r", "m"}, {"d"}, "/ln/Sub");
  constant("two", c.exponent);
  mb.node("Pow", {"d", "two"}, {"p"}, "/ln/Pow");
  test::set_ints(mb.node("ReduceMean", {"p"}, {"v"}, "/ln/ReduceMean_1"), "axes", axes);
  constant("eps", 1e-5f);
  mb.node("Add", {"v", "eps"}, {"ve"}, "/ln/Add");
  mb.node("Sqrt", {"ve"}, {"s"}, "/ln/Sqrt");
  mb.node("Div", {"d", "s"}, {"nd"}, "/ln/Div");
  mb.node("Mul", {"nd", "ln.weight"}, {c.bias ? "mw" : "y"}, "/ln/Mul");
  if (c.bias) mb.node("Add", {"mw", "ln.bias"}, {"y"}, "/ln/Add_1");
  mb.output("y", static_cast<int>(std::max(c.x.size(), c.scale.size())));
  if (c.sub_is_output) mb.output("d", static_cast<int>(c.x.size()));
  return mb;
}

TEST(LayerNormFusion, TorchChainIsOneOpThatComputesTheChain) {
  for (int k : {1, 2}) {
    for (bool bias : {true, false}) {
      Chain c;
      c.k = k;
      c.bias = bias;
      c.scale = k == 1 ? Shape{4} : Shape{3, 4};
      Graph fused = import(chain_model(c), "ln_fused");
      ASSERT_EQ(test::count_ops(fused, OpKind::LayerNormalization), 1) << print_graph(fused);
      EXPECT_EQ(fused.num_ops(), 2) << print_graph(fused);  // Relu, LayerNormalization
      const Op &ln = fused.op(1);
      EXPECT_EQ(ln.name, "/ln/LayerNorm");
      EXPECT_EQ(ln.attr_int("axis"), 3 - k);
      EXPECT_FLOAT_EQ(static_cast<float>(ln.attr_float("epsilon")), 1e-5f);
      EXPECT_EQ(ln.inputs.size(), bias ? 3u : 2u);
      EXPECT_EQ(fused.tensor(ln.outputs[0]).name, "y");
      // The same chain with d also a graph output is imported node by node: the oracle.
      c.sub_is_output = true;
      Graph chain = import(chain_model(c), "ln_chain");
      ASSERT_EQ(test::count_ops(chain, OpKind::LayerNormalization), 0) << print_graph(chain);
      std::vector<float> x = test::random_floats(24, 3, 2.0f);
      std::vector<double> a = test::run_forward(fused, "x", x, "y"), b = test::run_forward(chain, "x", x, "y");
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(b[i]))) << "k " << k << " i " << i;
    }
  }
}

TEST(LayerNormFusion, OtherChainsStayAsTheyAre) {
  Chain cube;
  cube.exponent = 3.0f;  // not a variance
  EXPECT_EQ(test::count_ops(import(chain_model(cube), "ln_cube"), OpKind::LayerNormalization), 0);
  Chain broadcast;  // the Mul broadcasts x's last dim 1 to the scale's 4: not a LayerNorm over x
  broadcast.x = {2, 3, 1};
  Graph g = import(chain_model(broadcast), "ln_broadcast");
  EXPECT_EQ(test::count_ops(g, OpKind::LayerNormalization), 0);
  EXPECT_EQ(g.tensor(*g.find_tensor("y")).shape, (Shape{2, 3, 4}));
}

}  // namespace
}  // namespace cleave
