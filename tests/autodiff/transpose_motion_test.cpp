// ir/transpose_motion.h: the moves it makes on torch's batch-first attention, the ones it refuses, and that the moved
// graph computes the same loss and gradients as the graph it came from (the reference interpreter runs both).
#include "ir/transpose_motion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ir/autodiff/autodiff.h"
#include "ir/interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace cleave {
namespace {

/** torch's batch-first attention, small: x [B=2, T=3, E=4] transposed to time-major, the in-projection (MatMul, bias
 *  Add) cut into q, k and v by Slices, heads gathered by Reshape/Transpose/Reshape, the out-projection, and the
 *  transpose back to batch-major. */
const std::string kAttention = R"(graph attn
tensor x f32[2,3,4] input
tensor w_in f32[12,4] param
tensor b_in f32[12] param
tensor w_out f32[4,4] param
tensor b_out f32[4] param
tensor xt f32[3,2,4] activation
tensor p f32[3,2,12] activation
tensor pb f32[3,2,12] activation
tensor q f32[3,2,4] activation
tensor k f32[3,2,4] activation
tensor v f32[3,2,4] activation
tensor qk f32[3,2,4] activation
tensor h f32[3,2,4] activation
tensor heads f32[3,2,2,2] activation
tensor swapped f32[3,2,2,2] activation
tensor gathered f32[3,2,4] activation
tensor o f32[3,2,4] activation
tensor ob f32[3,2,4] activation
tensor out f32[2,3,4] activation
tensor sq f32[2,3,4] activation
tensor loss f32[] activation
op in_t Transpose forward (x) -> (xt) {perm=[1,0,2]}
op in_proj MatMul forward (xt, w_in) -> (p) {transB=1}
op in_bias Add forward (b_in, p) -> (pb)
op cut_q Slice forward (pb) -> (q) {axes=[2], ends=[4], starts=[0], steps=[1]}
op cut_k Slice forward (pb) -> (k) {axes=[2], ends=[8], starts=[4], steps=[1]}
op cut_v Slice forward (pb) -> (v) {axes=[2], ends=[12], starts=[8], steps=[1]}
op mix Mul forward (q, k) -> (qk)
op mix2 Add forward (qk, v) -> (h)
op split_heads Reshape forward (h) -> (heads) {shape=[3,2,2,2]}
op swap Transpose forward (heads) -> (swapped) {perm=[0,1,3,2]}
op join_heads Reshape forward (swapped) -> (gathered) {shape=[3,2,4]}
op out_proj MatMul forward (gathered, w_out) -> (o) {transB=1}
op out_bias Add forward (o, b_out) -> (ob)
op out_t Transpose forward (ob) -> (out) {perm=[1,0,2]}
op square Mul forward (out, out) -> (sq)
op total ReduceSum forward (sq) -> (loss) {axes=[0,1,2], keepdims=0}
output loss
)";

/** Every source tensor filled with a fixed pattern of values in [-1, 1). */
interp::Values filled(const Graph &g) {
  interp::Values values = interp::initial_values(g);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    if (tensor.role != Role::input && tensor.role != Role::param) continue;
    interp::Value v;
    v.dtype = tensor.dtype;
    v.shape = tensor.shape;
    for (int64_t i = 0; i < num_elements(tensor.shape); ++i)
      v.data.push_back(std::fmod(0.37 * static_cast<double>(i + 7 * t) + 0.11, 2.0) - 1.0);
    values[static_cast<size_t>(t)] = v;
  }
  return values;
}

/** The loss and the gradients of the params and the input, by name, after autodiff and one interpreter run. */
std::map<std::string, std::vector<double>> loss_and_gradients(Graph g) {
  std::vector<TensorId> xs;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).role == Role::param || g.tensor(t).role == Role::input) xs.push_back(t);
  TensorId loss = *g.find_tensor("loss");
  std::map<TensorId, TensorId> grads = append_gradients(g, loss, xs);
  for (const std::string &p : verify_problems(g)) ADD_FAILURE() << "verifier: " << p;
  interp::Values values = filled(g);
  interp::run_graph(g, values, interp::Context{});
  std::map<std::string, std::vector<double>> out;
  out["loss"] = values[static_cast<size_t>(loss)]->data;
  for (auto [x, dx] : grads) out["d " + g.tensor(x).name] = values[static_cast<size_t>(dx)]->data;
  return out;
}

/** The names of the tensors the Transposes of `g` read. */
std::vector<std::string> transposed(const Graph &g) {
  std::vector<std::string> out;
  for (const Op &op : g.ops())
    if (op.kind == OpKind::Transpose) out.push_back(g.tensor(op.input(0)).name);
  return out;
}

TEST(TransposeMotion, BatchFirstAttentionTransposesNextToItsCopies) {
  Graph before = parse_graph(kAttention);
  Graph g = before;
  EXPECT_EQ(move_transposes(g), 2);
  for (const std::string &p : verify_problems(g)) ADD_FAILURE() << "verifier: " << p;
  // The input's transpose now follows each Slice (cutting the projection in batch-major order); the output's
  // follows the heads' Reshape, and the out-projection runs on time-major rows no more.
  EXPECT_EQ(transposed(g), (std::vector<std::string>{"q.rows", "k.rows", "v.rows", "heads", "gathered"}));
  EXPECT_EQ(g.tensor(*g.find_tensor("p")).shape, (Shape{2, 3, 12}));
  EXPECT_EQ(g.tensor(*g.find_tensor("o")).shape, (Shape{2, 3, 4}));
  EXPECT_EQ(g.tensor(*g.find_tensor("q")).shape, (Shape{3, 2, 4}));
  EXPECT_EQ(g.tensor(*g.find_tensor("out")).shape, (Shape{2, 3, 4}));
  EXPECT_EQ(g.op(g.tensor(*g.find_tensor("out")).producer).name, "out_bias");
  // The same loss and gradients: each op computes the same numbers, in another order of rows.
  std::map<std::string, std::vector<double>> want = loss_and_gradients(before), got = loss_and_gradients(g);
  ASSERT_EQ(got.size(), want.size());
  for (const auto &[name, values] : want) {
    ASSERT_EQ(got[name].size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_NEAR(got[name][i], values[i], 1e-6 * (1 + std::abs(values[i]))) << name << "[" << i << "]";
  }
  EXPECT_EQ(got["loss"], want["loss"]);
}

TEST(TransposeMotion, StaysWhereNoCopyWaits) {
  // `body` declares the tensors past x and w, and the ops.
  auto moves = [](const std::string &body) {
    Graph g = parse_graph("graph g\ntensor x f32[2,3,4] input\ntensor w f32[5,4] param\n" + body +
                          "tensor loss f32[] activation\nop total ReduceSum forward (r) -> (loss) "
                          "{axes=[0,1,2], keepdims=0}\noutput loss\n");
    int n = move_transposes(g);
    for (const std::string &p : verify_problems(g)) ADD_FAILURE() << "verifier: " << p;
    return n;
  };
  // A projection whose result is reduced, not cut by Slices: nothing to compose with.
  EXPECT_EQ(moves(R"(tensor xt f32[3,2,4] activation
tensor m f32[3,2,5] activation
tensor r f32[3,2,5] activation
op t Transpose forward (x) -> (xt) {perm=[1,0,2]}
op mm MatMul forward (xt, w) -> (m) {transB=1}
op relu Relu forward (m) -> (r)
)"), 0);
  // Cut by a Slice, but also read by another op.
  EXPECT_EQ(moves(R"(tensor xt f32[3,2,4] activation
tensor m f32[3,2,5] activation
tensor s f32[3,2,2] activation
tensor a f32[3,2,5] activation
tensor r f32[3,2,2] activation
op t Transpose forward (x) -> (xt) {perm=[1,0,2]}
op mm MatMul forward (xt, w) -> (m) {transB=1}
op cut Slice forward (m) -> (s) {axes=[2], ends=[2], starts=[0], steps=[1]}
op relu Relu forward (m) -> (a)
op cut2 Slice forward (a) -> (r) {axes=[2], ends=[2], starts=[0], steps=[1]}
)"), 0);
  // A transpose that moves the last axis reorders within rows.
  EXPECT_EQ(moves(R"(tensor r f32[4,3,2] activation
op t Transpose forward (x) -> (r) {perm=[2,1,0]}
)"), 0);
  // An Add of two full-size operands mixes the rows of both.
  EXPECT_EQ(moves(R"(tensor xt f32[3,2,4] activation
tensor a f32[3,2,4] activation
tensor r f32[3,2,2] activation
op t Transpose forward (x) -> (xt) {perm=[1,0,2]}
op add Add forward (xt, xt) -> (a)
op cut Slice forward (a) -> (r) {axes=[2], ends=[2], starts=[0], steps=[1]}
)"), 0);
  // A transpose after a copy, with no row-wise op between them: nothing to move past.
  EXPECT_EQ(moves(R"(tensor xr f32[3,2,4] activation
tensor r f32[2,3,4] activation
op flat Reshape forward (x) -> (xr) {shape=[3,2,4]}
op t Transpose forward (xr) -> (r) {perm=[1,0,2]}
)"), 0);
}

TEST(TransposeMotion, SlicesTakeTheTransposeWithTheirAxesRenumbered) {
  Graph g = parse_graph(R"(graph g
tensor x f32[2,3,4] input
tensor xt f32[3,2,4] activation
tensor r f32[2,2,4] activation
tensor loss f32[] activation
op t Transpose forward (x) -> (xt) {perm=[1,0,2]}
op cut Slice forward (xt) -> (r) {axes=[0], ends=[2], starts=[0], steps=[1]}
op total ReduceSum forward (r) -> (loss) {axes=[0,1,2], keepdims=0}
output loss
)");
  EXPECT_EQ(move_transposes(g), 1);
  for (const std::string &p : verify_problems(g)) ADD_FAILURE() << "verifier: " << p;
  // The first two of the 3 time steps are x's axis 1.
  const Op &cut = g.op(*g.find_op("cut"));
  EXPECT_EQ(cut.attr_ints("axes"), (std::vector<int64_t>{1}));
  EXPECT_EQ(g.tensor(cut.input(0)).name, "x");
  EXPECT_EQ(g.tensor(cut.output(0)).shape, (Shape{2, 2, 4}));
  EXPECT_EQ(g.op(g.tensor(*g.find_tensor("r")).producer).name, "t");
}

}  // namespace
}  // namespace cleave
