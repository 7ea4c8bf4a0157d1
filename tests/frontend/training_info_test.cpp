// Models with a TrainingInfoProto: Gradient nodes go through autodiff, update_binding becomes assigns.
#include <gtest/gtest.h>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "tests/frontend/model_builder.h"

namespace cleave {
namespace {

using test::kF32;
using test::ModelBuilder;

TEST(TrainingInfo, GradientAndUpdateBinding) {
  ModelBuilder mb;
  mb.add_opset("ai.onnx.preview.training", 1);
  mb.input("x", kF32, {2, 3});
  mb.init_f("w", {3}, {1, 2, 3});
  mb.node("Mul", {"x", "w"}, {"h"}, "mul");
  auto &rs = mb.node("ReduceSum", {"h"}, {"loss"}, "sum");
  test::set_int(rs, "keepdims", 0);
  mb.output("loss", 0);

  onnx::TrainingInfoProto *ti = mb.m.add_training_info();
  onnx::GraphProto *alg = ti->mutable_algorithm();
  alg->set_name("sgd");
  auto *lr = alg->add_initializer();
  lr->set_name("lr");
  lr->set_data_type(kF32);
  lr->add_float_data(0.1f);
  auto node = [&](const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs,
                  const std::string &name, const std::string &domain = "") -> onnx::NodeProto & {
    auto *n = alg->add_node();
    n->set_op_type(op);
    n->set_name(name);
    n->set_domain(domain);
    for (auto &i : ins) n->add_input(i);
    for (auto &o : outs) n->add_output(o);
    return *n;
  };
  auto &grad = node("Gradient", {"w"}, {"dw"}, "grad", "ai.onnx.preview.training");
  auto *xs = grad.add_attribute();
  xs->set_name("xs");
  xs->set_type(onnx::AttributeProto::STRINGS);
  xs->add_strings("w");
  test::set_string(grad, "y", "loss");
  node("Mul", {"lr", "dw"}, {"step"}, "scale");
  node("Sub", {"w", "step"}, {"w_new"}, "update");
  auto *out = alg->add_output();
  out->set_name("w_new");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  auto *b = ti->add_update_binding();
  b->set_key("w");
  b->set_value("w_new");

  test::TempDir dir("training");
  Graph g = import_onnx(mb.save(dir / "model.onnx"));
  auto dw = g.find_tensor("dw");
  ASSERT_TRUE(dw.has_value());
  EXPECT_EQ(g.tensor(*dw).shape, (Shape{3}));
  EXPECT_EQ(g.op(g.tensor(*dw).producer).phase, Phase::backward);
  auto upd = g.find_op("update");
  ASSERT_TRUE(upd.has_value());
  EXPECT_EQ(g.op(*upd).phase, Phase::update);
  EXPECT_EQ(g.op(*upd).kind, OpKind::Sub);
  ASSERT_EQ(g.assigns.size(), 1u);
  EXPECT_EQ(g.tensor(g.assigns[0].dst).name, "w");
  EXPECT_EQ(g.tensor(g.assigns[0].src).name, "w_new");
  // lr is an algorithm constant, not a trainable parameter.
  EXPECT_EQ(g.tensor(*g.find_tensor("lr")).role, Role::constant);
}

}  // namespace
}  // namespace cleave
