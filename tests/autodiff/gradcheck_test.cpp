// Finite-difference checks of every differentiable forward kind's gradient rule, over several shapes and
// attribute settings each.
#include <gtest/gtest.h>

#include "tests/autodiff/gradcheck.h"

namespace cleave::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(GradCheck, BroadcastingBinaryOps) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{1, 3, 1}, {2, 1, 4}}, {{4}, {2, 3, 4}}, {{}, {2, 3}}};
  int seed = 0;
  for (OpKind kind : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
    for (const auto &[sa, sb] : shapes) {
      GraphBuilder b(++seed);
      TensorId a = b.input(sa);
      // Keep divisors away from zero.
      TensorId c = kind == OpKind::Div ? b.input(sb, 0.5, 2.0) : b.input(sb);
      TensorId y = b.op(kind, {a, c});
      check_gradients(b, {y}, {a, c}, std::string(op_kind_name(kind)) + shape_str(sa) + shape_str(sb));
    }
  }
}

TEST(GradCheck, PowPositiveBase) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{2, 3}, {}}};
  int seed = 100;
  for (const auto &[sa, sb] : shapes) {
    GraphBuilder b(++seed);
    TensorId a = b.input(sa, 0.5, 2.0);
    TensorId e = b.input(sb, -1.5, 2.5);
    TensorId y = b.op(OpKind::Pow, {a, e});
    check_gradients(b, {y}, {a, e}, "Pow" + shape_str(sa) + shape_str(sb));
  }
  // Only the base needs a gradient (integer-like exponent given as a non-differentiated tensor).
  GraphBuilder b(110);
  TensorId a = b.input({3, 2}, 0.5, 2.0);
  TensorId e = b.input({1}, 2.0, 3.0);
  check_gradients(b, {b.op(OpKind::Pow, {a, e})}, {a}, "Pow base only");
}

TEST(GradCheck, UnaryOps) {
  struct Case {
    OpKind kind;
    double lo, hi;
  };
  const std::vector<Case> cases = {{OpKind::Sqrt, 0.2, 2.0},  {OpKind::Neg, -1, 1},     {OpKind::Exp, -1, 1},
                                   {OpKind::Log, 0.2, 2.0},   {OpKind::Erf, -1.5, 1.5}, {OpKind::Relu, -1, 1},
                                   {OpKind::Sigmoid, -3, 3},  {OpKind::Tanh, -2, 2},    {OpKind::Identity, -1, 1}};
  int seed = 200;
  for (const Case &c : cases)
    for (const Shape &s : {Shape{2, 3, 4}, Shape{5}}) {
      GraphBuilder b(++seed);
      TensorId x = b.input(s, c.lo, c.hi);
      check_gradients(b, {b.op(c.kind, {x})}, {x}, std::string(op_kind_name(c.kind)) + shape_str(s));
    }
}

TEST(GradCheck, TrigonometricAndHyperbolicOps) {
  // Inside each domain, away from the poles of the derivatives (|x| = 1 for Asin, Acos, Atanh; x = 1 for Acosh) and of
  // Tan (pi / 2), where a central difference would not resolve them.
  struct Case {
    OpKind kind;
    double lo, hi;
  };
  const std::vector<Case> cases = {{OpKind::Sin, -3, 3},      {OpKind::Cos, -3, 3},       {OpKind::Tan, -1.2, 1.2},
                                   {OpKind::Asin, -0.9, 0.9}, {OpKind::Acos, -0.9, 0.9},  {OpKind::Atan, -3, 3},
                                   {OpKind::Sinh, -2, 2},     {OpKind::Cosh, -2, 2},      {OpKind::Asinh, -3, 3},
                                   {OpKind::Acosh, 1.1, 3},   {OpKind::Atanh, -0.9, 0.9}};
  int seed = 250;
  for (const Case &c : cases)
    for (const Shape &s : {Shape{2, 3, 4}, Shape{5}}) {
      GraphBuilder b(++seed);
      TensorId x = b.input(s, c.lo, c.hi);
      check_gradients(b, {b.op(c.kind, {x})}, {x}, std::string(op_kind_name(c.kind)) + shape_str(s));
    }
}

TEST(GradCheck, SoftmaxAndLogSoftmax) {
  int seed = 300;
  for (OpKind kind : {OpKind::Softmax, OpKind::LogSoftmax})
    for (int64_t axis : {0, 1, 2}) {
      GraphBuilder b(++seed);
      TensorId x = b.input({2, 3, 4}, -2, 2);
      TensorId y = b.op(kind, {x}, {{"axis", axis}});
      check_gradients(b, {y}, {x}, std::string(op_kind_name(kind)) + " axis " + std::to_string(axis));
    }
}

TEST(GradCheck, SoftmaxCrossEntropyLoss) {
  int seed = 400;
  for (const std::string reduction : {"none", "sum", "mean"})
    for (bool weighted : {false, true})
      for (bool ignore : {false, true})
        for (bool spatial : {false, true})
          for (bool use_log_prob : {false, true}) {
            GraphBuilder b(++seed);
            Shape s = spatial ? Shape{3, 4, 2} : Shape{5, 4};
            Shape ls = spatial ? Shape{3, 2} : Shape{5};
            TensorId scores = b.input(s, -2, 2);
            std::vector<int64_t> labels;
            for (int64_t i = 0; i < num_elements(ls); ++i) labels.push_back(b.integer(0, 3));
            labels[1] = 2;  // the ignored class appears at least once
            TensorId lab = b.ints(ls, labels);
            std::vector<TensorId> ins = {scores, lab};
            if (weighted) ins.push_back(b.input({4}, 0.5, 2.0));
            AttrMap attrs = {{"reduction", reduction}};
            if (ignore) attrs["ignore_index"] = int64_t{2};
            std::vector<TensorId> outs = b.op_multi(OpKind::SoftmaxCrossEntropyLoss, ins, attrs, {true, use_log_prob});
            if (!use_log_prob) outs.pop_back();
            // Only the scores: the class weights get no gradient (torch: "derivative for weight not implemented").
            check_gradients(b, outs, {scores},
                            "SCE " + reduction + (weighted ? " weighted" : "") + (ignore ? " ignore" : "") +
                                (spatial ? " spatial" : "") + (use_log_prob ? " +log_prob" : ""));
          }
}

TEST(GradCheck, NegativeLogLikelihoodLoss) {
  int seed = 500;
  for (const std::string reduction : {"none", "sum", "mean"})
    for (bool weighted : {false, true})
      for (bool ignore : {false, true})
        for (bool spatial : {false, true}) {
          GraphBuilder b(++seed);
          Shape s = spatial ? Shape{3, 4, 2} : Shape{5, 4};
          Shape ls = spatial ? Shape{3, 2} : Shape{5};
          TensorId input = b.input(s, -2, 0);
          std::vector<int64_t> labels;
          for (int64_t i = 0; i < num_elements(ls); ++i) labels.push_back(b.integer(0, 3));
          labels[0] = 1;
          std::vector<TensorId> ins = {input, b.ints(ls, labels)};
          if (weighted) ins.push_back(b.input({4}, 0.5, 2.0));
          AttrMap attrs = {{"reduction", reduction}};
          if (ignore) attrs["ignore_index"] = int64_t{1};
          TensorId y = b.op(OpKind::NegativeLogLikelihoodLoss, ins, attrs);
          check_gradients(b, {y}, {input},
                          "NLL " + reduction + (weighted ? " weighted" : "") + (ignore ? " ignore" : "") +
                              (spatial ? " spatial" : ""));
        }
}

TEST(GradCheck, MatMul) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 2}},
      {{4}, {4, 5}},          {{2, 3, 4}, {4}},    {{4}, {4}},          {{4}, {2, 4, 3}},
      {{2, 2, 3, 4}, {2, 1, 4, 3}}};
  int seed = 600;
  for (const auto &[sa, sb] : shapes) {
    GraphBuilder b(++seed);
    TensorId a = b.input(sa), c = b.input(sb);
    check_gradients(b, {b.op(OpKind::MatMul, {a, c})}, {a, c}, "MatMul" + shape_str(sa) + shape_str(sb));
  }
}

TEST(GradCheck, MatMulTransposedOperands) {
  // transA / transB (stored shapes): batched with broadcast, a vector times a transposed matrix, a Linear by a
  // transposed weight ([rows, k] folded GEMMs) and the time-major Linear.
  struct Case {
    Shape a, b;
    bool ta, tb;
    int sample_axis;
  };
  const std::vector<Case> cases = {{{2, 1, 4, 3}, {3, 5, 4}, true, true, 0}, {{4, 3}, {2, 4, 5}, true, false, 0},
                                   {{2, 3, 4}, {2, 5, 4}, false, true, 0},   {{4}, {5, 4}, false, true, 0},
                                   {{2, 4, 3}, {4}, true, false, 0},         {{2, 3, 4}, {5, 4}, false, true, 0},
                                   {{3, 2, 4}, {5, 4}, false, true, 1}};
  int seed = 620;
  for (const Case &k : cases) {
    GraphBuilder b(++seed);
    TensorId a = b.input(k.a), c = b.input(k.b, -1.0, 1.0, Role::param);
    b.g.tensor(a).sample_axis = k.sample_axis;
    AttrMap flags;
    if (k.ta) flags["transA"] = int64_t{1};
    if (k.tb) flags["transB"] = int64_t{1};
    std::string label = "MatMul" + shape_str(k.a) + (k.ta ? "T" : "") + shape_str(k.b) + (k.tb ? "T" : "") +
                        " batch dim " + std::to_string(k.sample_axis);
    check_gradients(b, {b.op(OpKind::MatMul, {a, c}, flags)}, {a, c}, label);
    for (const Op &op : b.g.ops())
      EXPECT_FALSE(op.kind == OpKind::Transpose && (op.inputs[0] == c || (k.sample_axis == 0 && op.inputs[0] == a)))
          << label << ": " << op.name << " transposes an operand";
  }
}

TEST(GradCheck, MatMulOfTimeMajorActivations) {
  // A's batch in an inner dim (torch's attention): the rule keeps the batch apart instead of folding A's leading
  // dims into rows; dW is a Gemm summing A's and dY's leading dims as they lie, with no transposed copy.
  const std::vector<std::pair<Shape, int>> cases = {{{3, 2, 4}, 1}, {{2, 3, 2, 4}, 2}, {{2, 3, 2, 4}, 1}};
  int seed = 650;
  for (const auto &[sa, axis] : cases) {
    GraphBuilder b(++seed);
    TensorId a = b.input(sa), w = b.input({4, 5}, -1.0, 1.0, Role::param);
    b.g.tensor(a).sample_axis = axis;
    std::string label = "MatMul" + shape_str(sa) + " batch dim " + std::to_string(axis);
    check_gradients(b, {b.op(OpKind::MatMul, {a, w})}, {a, w}, label);
    int transposes = 0, rows_gemms = 0;
    for (const Op &op : b.g.ops()) {
      transposes += op.kind == OpKind::Transpose;
      rows_gemms += op.kind == OpKind::Gemm && op.inputs[0] == a && b.g.tensor(op.inputs[1]).shape.size() == sa.size();
    }
    EXPECT_EQ(transposes, 0) << label;
    EXPECT_EQ(rows_gemms, 1) << label;
  }
}

TEST(GradCheck, Gemm) {
  int seed = 700;
  const int64_t m = 3, k = 4, n = 5;
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (const Shape &cs : {Shape{}, Shape{n}, Shape{m, 1}, Shape{m, n}, Shape{1}})
        for (bool with_c : {false, true}) {
          if (!with_c && !cs.empty()) continue;
          GraphBuilder b(++seed);
          TensorId a = b.input(ta ? Shape{k, m} : Shape{m, k});
          TensorId w = b.input(tb ? Shape{n, k} : Shape{k, n});
          std::vector<TensorId> ins = {a, w};
          if (with_c) ins.push_back(b.input(cs));
          AttrMap attrs = {{"alpha", 0.7}, {"beta", with_c ? 1.3 : 1.0}, {"transA", ta}, {"transB", tb}};
          check_gradients(b, {b.op(OpKind::Gemm, ins, attrs)}, ins,
                          "Gemm transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) +
                              (with_c ? " C" + shape_str(cs) : ""));
        }
}

TEST(GradCheck, LayoutOps) {
  {
    GraphBuilder b(801);
    TensorId x = b.input({2, 3, 4});
    check_gradients(b, {b.op(OpKind::Reshape, {x}, {{"shape", Ints{4, 6}}})}, {x}, "Reshape");
  }
  for (const Ints &perm : {Ints{2, 0, 1}, Ints{1, 0, 2}, Ints{0, 2, 1}}) {
    GraphBuilder b(802);
    TensorId x = b.input({2, 3, 4});
    check_gradients(b, {b.op(OpKind::Transpose, {x}, {{"perm", perm}})}, {x}, "Transpose");
  }
  for (const auto &[from, to] : std::vector<std::pair<Shape, Ints>>{
           {{3, 1}, {2, 3, 4}}, {{1, 4}, {3, 4}}, {{}, {2, 2}}, {{2, 1, 3}, {2, 4, 3}}, {{3}, {2, 1, 3}}}) {
    GraphBuilder b(803);
    TensorId x = b.input(from);
    check_gradients(b, {b.op(OpKind::Expand, {x}, {{"shape", to}})}, {x}, "Expand" + shape_str(from));
  }
  for (int64_t axis : {0, 1, 2}) {
    GraphBuilder b(804 + axis);
    Shape s1 = {2, 3, 4}, s2 = s1, s3 = s1;
    s2[static_cast<size_t>(axis)] = 1;
    s3[static_cast<size_t>(axis)] = 2;
    TensorId x1 = b.input(s1), x2 = b.input(s2), x3 = b.input(s3);
    check_gradients(b, {b.op(OpKind::Concat, {x1, x2, x3}, {{"axis", axis}})}, {x1, x2, x3},
                    "Concat axis " + std::to_string(axis));
  }
  for (int64_t axis : {0, 1}) {
    for (bool all_used : {true, false}) {
      GraphBuilder b(810 + axis);
      TensorId x = b.input({5, 6});
      Ints split = axis == 0 ? Ints{2, 1, 2} : Ints{3, 1, 2};
      std::vector<TensorId> ys =
          b.op_multi(OpKind::Split, {x}, {{"axis", axis}, {"split", split}}, {true, true, true});
      if (!all_used) ys.erase(ys.begin() + 1);  // the middle output feeds nothing: its gradient is zeros
      check_gradients(b, ys, {x}, "Split axis " + std::to_string(axis) + (all_used ? "" : " partial"));
    }
  }
}

TEST(GradCheck, SliceWithSteps) {
  struct Case {
    Ints starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {{{1}, {3}, {1}, {1}},
                                   {{0, 1}, {5, 4}, {0, 2}, {2, 2}},
                                   {{4, 3}, {0, 0}, {0, 1}, {-2, -1}},
                                   {{1, 0, 0}, {5, 3, 5}, {0, 1, 2}, {1, 3, 2}}};
  int seed = 900;
  for (const Case &c : cases) {
    GraphBuilder b(++seed);
    TensorId x = b.input({5, 4, 6});
    TensorId y = b.op(OpKind::Slice, {x}, {{"starts", c.starts}, {"ends", c.ends}, {"axes", c.axes}, {"steps", c.steps}});
    check_gradients(b, {y}, {x}, "Slice case " + std::to_string(seed));
  }
}

TEST(GradCheck, SlicesThatTileAnAxisConcatenateTheirGradients) {
  // torch's q, k, v taken from one projection: Slices tiling the last axis (the first case given out of order).
  // Their gradient is one Concat; slices that overlap, leave a gap, or whose tensor has another reader keep
  // SliceGrads summed by Adds.
  struct Case {
    std::vector<std::pair<int64_t, int64_t>> spans;  // [start, end) along axis 2
    bool other_reader;
    bool concatenates;
  };
  const std::vector<Case> cases = {{{{4, 6}, {0, 2}, {2, 4}}, false, true},
                                   {{{0, 3}, {3, 6}}, false, true},
                                   {{{0, 3}, {2, 6}}, false, false},
                                   {{{0, 2}, {4, 6}}, false, false},
                                   {{{0, 3}, {3, 6}}, true, false}};
  int seed = 910;
  for (const Case &c : cases) {
    GraphBuilder b(++seed);
    TensorId x = b.input({2, 3, 6});
    TensorId h = b.op(OpKind::Tanh, {x});  // the sliced tensor is an op's result, as a projection's is
    std::vector<TensorId> ys;
    for (const auto &[start, end] : c.spans)
      ys.push_back(b.op(OpKind::Slice, {h}, {{"starts", Ints{start}}, {"ends", Ints{end}}, {"axes", Ints{2}}}));
    if (c.other_reader) ys.push_back(b.op(OpKind::Sigmoid, {h}));
    std::string label = "slices";
    for (const auto &[start, end] : c.spans) label += " " + std::to_string(start) + ":" + std::to_string(end);
    if (c.other_reader) label += " and a Sigmoid";
    check_gradients(b, ys, {x}, label);
    int concats = 0, slice_grads = 0;
    for (const Op &op : b.g.ops()) {
      concats += op.kind == OpKind::Concat && op.phase == Phase::backward;
      slice_grads += op.kind == OpKind::SliceGrad;
    }
    EXPECT_EQ(concats, c.concatenates ? 1 : 0) << label;
    EXPECT_EQ(slice_grads, c.concatenates ? 0 : static_cast<int>(c.spans.size())) << label;
  }
}

TEST(GradCheck, GatherWithRepeatedIndices) {
  for (int64_t axis : {0, 1}) {
    GraphBuilder b(1000 + axis);
    TensorId data = b.input({4, 5, 2});
    TensorId idx = b.ints({2, 3}, {0, 3, 3, 1, -1, 0});  // repeats scatter-add; -1 counts from the end
    check_gradients(b, {b.op(OpKind::Gather, {data, idx}, {{"axis", axis}})}, {data},
                    "Gather axis " + std::to_string(axis));
  }
}

TEST(GradCheck, Conv) {
  struct Case {
    Shape x, w;
    Ints strides, pads, dilations;
    int64_t group;
    bool bias;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      {{1, 4, 6, 5}, {6, 2, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 1}, 2, true},
      {{2, 2, 7, 7}, {2, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 2, false},
      {{1, 3, 6, 6}, {2, 3, 2, 2}, {3, 2}, {2, 1, 0, 2}, {1, 2}, 1, true},
      {{2, 2, 9}, {3, 2, 3}, {2}, {1, 2}, {2}, 1, true},
  };
  int seed = 1100;
  for (const Case &c : cases) {
    GraphBuilder b(++seed);
    TensorId x = b.input(c.x), w = b.input(c.w);
    std::vector<TensorId> ins = {x, w};
    if (c.bias) ins.push_back(b.input({c.w[0]}));
    Ints kernel(c.w.begin() + 2, c.w.end());
    AttrMap attrs = {{"strides", c.strides},
                     {"pads", c.pads},
                     {"dilations", c.dilations},
                     {"group", c.group},
                     {"kernel_shape", kernel}};
    check_gradients(b, {b.op(OpKind::Conv, ins, attrs)}, ins, "Conv case " + std::to_string(seed));
  }
}

TEST(GradCheck, Pools) {
  struct Case {
    Shape x;
    Ints kernel, strides, pads, dilations;
    int64_t ceil_mode;
  };
  const std::vector<Case> cases = {
      {{2, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0},
      {{1, 2, 5, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 1, 7, 6}, {2, 3}, {2, 1}, {0, 1, 1, 0}, {1, 1}, 1},
      {{1, 2, 7, 7}, {2, 2}, {1, 2}, {0, 0, 0, 0}, {2, 1}, 0},
      {{2, 2, 8}, {3}, {2}, {1, 1}, {1}, 1},
  };
  int seed = 1200;
  for (const Case &c : cases) {
    {
      GraphBuilder b(++seed);
      TensorId x = b.input(c.x);
      AttrMap attrs = {{"kernel_shape", c.kernel}, {"strides", c.strides},   {"pads", c.pads},
                       {"dilations", c.dilations}, {"ceil_mode", c.ceil_mode}, {"storage_order", int64_t{0}}};
      check_gradients(b, {b.op(OpKind::MaxPool, {x}, attrs)}, {x}, "MaxPool case " + std::to_string(seed));
    }
    if (c.dilations != Ints(c.dilations.size(), 1)) continue;
    for (int64_t include_pad : {0, 1}) {
      GraphBuilder b(++seed);
      TensorId x = b.input(c.x);
      AttrMap attrs = {{"kernel_shape", c.kernel},
                       {"strides", c.strides},
                       {"pads", c.pads},
                       {"ceil_mode", c.ceil_mode},
                       {"count_include_pad", include_pad}};
      check_gradients(b, {b.op(OpKind::AveragePool, {x}, attrs)}, {x}, "AveragePool case " + std::to_string(seed));
    }
  }
  for (const Shape &s : {Shape{2, 3, 4, 5}, Shape{2, 3, 4}}) {
    GraphBuilder b(1250);
    TensorId x = b.input(s);
    check_gradients(b, {b.op(OpKind::GlobalAveragePool, {x})}, {x}, "GlobalAveragePool" + shape_str(s));
  }
}

TEST(GradCheck, Reductions) {
  int seed = 1300;
  for (OpKind kind : {OpKind::ReduceMean, OpKind::ReduceSum})
    for (const Ints &axes : {Ints{1}, Ints{0, 2}, Ints{0, 1, 2}})
      for (int64_t keepdims : {0, 1}) {
        GraphBuilder b(++seed);
        TensorId x = b.input({2, 3, 4});
        check_gradients(b, {b.op(kind, {x}, {{"axes", axes}, {"keepdims", keepdims}})}, {x},
                        std::string(op_kind_name(kind)) + " keepdims " + std::to_string(keepdims));
      }
}

TEST(GradCheck, BatchNormalization) {
  int seed = 1400;
  for (const Shape &s : {Shape{4, 3, 2, 2}, Shape{5, 3}, Shape{2, 3, 4}})
    for (int64_t training : {1, 0})
      for (bool stats_outputs : {false, true}) {
        if (!training && stats_outputs) continue;
        GraphBuilder b(++seed);
        TensorId x = b.input(s, -2, 2), scale = b.input({3}, 0.5, 1.5), bias = b.input({3});
        TensorId mean = b.input({3}, -0.5, 0.5), var = b.input({3}, 0.5, 1.5);
        AttrMap attrs = {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", training}};
        std::vector<TensorId> ys = b.op_multi(OpKind::BatchNormalization, {x, scale, bias, mean, var}, attrs,
                                              {true, stats_outputs, stats_outputs});
        check_gradients(b, {ys[0]}, {x, scale, bias},
                        "BatchNormalization" + shape_str(s) + (training ? " training" : " inference") +
                            (stats_outputs ? " +running stats" : ""));
      }
}

TEST(GradCheck, Dropout) {
  for (int64_t training : {1, 0})
    for (bool mask_output : {false, true}) {
      GraphBuilder b(1500 + training * 2 + mask_output);
      TensorId x = b.input({4, 6});
      std::vector<TensorId> ys = b.op_multi(OpKind::Dropout, {x},
                                            {{"ratio", 0.3}, {"training_mode", training}, {"seed", int64_t{7}}},
                                            {true, mask_output});
      check_gradients(b, {ys[0]}, {x},
                      std::string("Dropout") + (training ? " training" : " inference") + (mask_output ? " +mask" : ""));
    }
}

TEST(GradCheck, Chain) {
  // A small MLP-with-loss chain so the rules compose: Gemm -> Relu -> Gemm -> SCE mean.
  GraphBuilder b(1600);
  TensorId x = b.input({4, 5}), w1 = b.input({6, 5}), b1 = b.input({6}), w2 = b.input({6, 3}), b2 = b.input({3});
  TensorId h = b.op(OpKind::Gemm, {x, w1, b1}, {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t{0}}, {"transB", int64_t{1}}});
  TensorId r = b.op(OpKind::Relu, {h});
  TensorId o = b.op(OpKind::Gemm, {r, w2, b2}, {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t{0}}, {"transB", int64_t{0}}});
  TensorId lab = b.ints({4}, {0, 2, 1, 2});
  TensorId loss = b.op(OpKind::SoftmaxCrossEntropyLoss, {o, lab}, {{"reduction", std::string("mean")}});
  check_gradients(b, {loss}, {x, w1, b1, w2, b2}, "MLP chain");
}

}  // namespace
}  // namespace cleave::testing
