// Plan text (round trip, parse errors), the validator (each error by its exact message) and the planners (golden
// plans of the example models, determinism, rules every data plan must follow).
//
// Golden files: tests/planner/golden/*.plan. Regenerate with tests/planner/update_golden.sh (runs this test with
// CLEAVE_UPDATE_GOLDEN=1) and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "frontend/onnx_import.h"
#include "ir/autodiff/autodiff.h"
#include "ir/describe/description.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "planner/search/data_plan.h"
#include "planner/search/make_plan.h"
#include "planner/search/strategies.h"
#include "planner/plan/validate.h"

namespace cleave::plan {
namespace {

// x -> Gemm (bias c) -> h -> Softmax (axis 1, opaque) -> p -> Reshape [512] -> f.
const char *kGraph = R"(graph small
tensor x f32[16,64] input
tensor w f32[32,64] param
tensor c f32[32] param
tensor h f32[16,32] activation
tensor p f32[16,32] activation
tensor f f32[512] activation
op g Gemm forward (x, w, c) -> (h) {alpha=1.0, beta=1.0, transA=0, transB=1}
op s Softmax forward (h) -> (p) {axis=1}
op r Reshape forward (p) -> (f) {shape=[512]}
)";

const char *kDataPlan = R"(plan devices=2
tensor x devices=[0,1] mesh=[2] [split(0)]
tensor w devices=[0,1] mesh=[2] [replicate]
tensor c devices=[0,1] mesh=[2] [replicate]
tensor h devices=[0,1] mesh=[2] [split(0)]
tensor p devices=[0,1] mesh=[2] [split(0)]
tensor f devices=[0,1] mesh=[2] [split(0)]
op g devices=[0,1] mesh=[2] [m]
op s devices=[0,1] mesh=[2] [i]
op r devices=[0,1] mesh=[2] [i]
)";

Graph small_graph() {
  Graph g = parse_graph(kGraph);
  verify(g);
  return g;
}

std::string replaced(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

/** The first validation problem of `text` against the small graph. */
std::string first_problem(const std::string &text) {
  std::vector<std::string> problems = plan_problems(small_graph(), parse_plan(text));
  return problems.empty() ? "(valid)" : problems.front();
}

TEST(PlanText, DataPlanOfTheSmallGraph) {
  // The data planner splits the batch var of each op; Softmax's batch dim i is not its opaque axis, and the
  // flattening Reshape splits its leading var i, so f comes out split(0).
  EXPECT_EQ(print_plan(make_plan(small_graph(), "data", 2)), kDataPlan);
  EXPECT_EQ(first_problem(kDataPlan), "(valid)");
}

TEST(PlanText, RoundTrip) {
  EXPECT_EQ(print_plan(parse_plan(kDataPlan)), kDataPlan);
  std::string odd = "plan devices=6\n"
                    "tensor \"a b\\\"c\" devices=[5,0,1,2] mesh=[2,2] [split(1),partial]\n"
                    "tensor t devices=[] mesh=[] []\n"
                    "op \"x y\" devices=[3,4,5,0,1,2] mesh=[3,1,2] [-,k,b]\n";
  Plan p = parse_plan(odd);
  EXPECT_EQ(print_plan(p), odd);
  EXPECT_EQ(parse_plan(print_plan(p)), p);
  EXPECT_EQ(p.tensors[0].name, "a b\"c");
  EXPECT_EQ(p.ops[0].config.vars, (std::vector<std::string>{"", "k", "b"}));
  // Comments and blank lines are not part of the plan.
  EXPECT_EQ(print_plan(parse_plan("# made by hand\n\n" + std::string(kDataPlan))), kDataPlan);
}

TEST(PlanText, ParseErrorsNameTheLine) {
  auto error = [](const std::string &text) {
    try {
      parse_plan(text, "p.plan");
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(error(""), "p.plan: empty plan (expected 'plan devices=N')");
  EXPECT_EQ(error("tensor x devices=[0] mesh=[1] [replicate]\n"), "p.plan:1: expected 'plan devices=N' first");
  EXPECT_EQ(error("plan devices=2\ntensor x devices=[0] mesh=[1] [spilt(0)]\n"),
            "p.plan:2: unknown sharding \"spilt\" (expected split(D), replicate or partial)");
  EXPECT_EQ(error("plan devices=2\nop g devices=[0,1] mesh=[2] [m] extra\n"),
            "p.plan:2: unexpected text near \"extra\"");
  EXPECT_EQ(error("plan devices=2\nop g devices=[0,1 mesh=[2] [m]\n"), "p.plan:2: expected ',' near \"mesh=[2] [m]\"");
  EXPECT_EQ(error("plan devices=2\nedge a b\n"), "p.plan:2: unknown line kind \"edge\" (expected plan, tensor or op)");
  EXPECT_EQ(error("plan devices=0\n"), "p.plan:1: device count 0 out of range");
  // Hostile text (issue 25): nothing after the device count; a garbage line is quoted cut to 80 characters.
  EXPECT_EQ(error("plan devices=4.0\n"), "p.plan:1: unexpected text near \".0\"");
  EXPECT_EQ(error("plan devices=4 extra\n"), "p.plan:1: unexpected text near \"extra\"");
  EXPECT_EQ(error("plan devices=2\n" + std::string(1 << 20, 'x') + "\n"),
            "p.plan:2: unknown line kind \"" + std::string(80, 'x') + "...\" (expected plan, tensor or op)");
  EXPECT_EQ(error("plan devices=2\nop g devices=[0,1 mesh=[2] [m] and much more text\n"),
            "p.plan:2: expected ',' near \"mesh=[2] [m] and...\"");
}

TEST(PlanValidate, EachErrorByItsMessage) {
  const std::string base = kDataPlan;
  EXPECT_EQ(first_problem(replaced(base, "tensor w ", "tensor ww ")), "unknown tensor \"ww\"");
  EXPECT_EQ(first_problem(replaced(base, "op s ", "op soft ")), "unknown op \"soft\"");
  EXPECT_EQ(first_problem(replaced(base, "tensor c devices=[0,1] mesh=[2] [replicate]\n", "")),
            "missing entry for tensor \"c\"");
  EXPECT_EQ(first_problem(replaced(base, "op r devices=[0,1] mesh=[2] [i]\n", "")), "missing entry for op \"r\"");
  EXPECT_EQ(first_problem(base + "tensor w devices=[0] mesh=[1] [replicate]\n"), "duplicate entry for tensor \"w\"");
  EXPECT_EQ(first_problem(replaced(replaced(base, "plan devices=2", "plan devices=3"),
                                   "tensor x devices=[0,1] mesh=[2]", "tensor x devices=[0,1,2] mesh=[3]")),
            "tensor \"x\": split(0) over 3 devices does not divide dim 0 of size 16");
  EXPECT_EQ(first_problem(replaced(base, "tensor w devices=[0,1]", "tensor w devices=[0,2]")),
            "tensor \"w\": device 2 out of range (the plan has 2 devices)");
  EXPECT_EQ(first_problem(replaced(base, "tensor w devices=[0,1]", "tensor w devices=[1,1]")),
            "tensor \"w\": duplicate device 1 in group [1,1]");
  EXPECT_EQ(first_problem(replaced(base, "tensor w devices=[0,1] mesh=[2]", "tensor w devices=[0,1] mesh=[1]")),
            "tensor \"w\": mesh [1] has 1 devices, its group 2");
  EXPECT_EQ(first_problem(replaced(base, "op g devices=[0,1] mesh=[2]", "op g devices=[0,1] mesh=[3]")),
            "op \"g\": mesh [3] has 3 devices, its group 2");
  EXPECT_EQ(first_problem(replaced(base, "tensor w devices=[0,1] mesh=[2] [replicate]",
                                   "tensor w devices=[0,1] mesh=[2] [split(2)]")),
            "tensor \"w\": split(2) of a tensor of rank 2");
  EXPECT_EQ(first_problem(replaced(base, "[replicate]\ntensor c", "[replicate,replicate]\ntensor c")),
            "tensor \"w\": 2 shardings for a mesh of rank 1");
  EXPECT_EQ(first_problem(replaced(base, "op g devices=[0,1] mesh=[2] [m]", "op g devices=[0,1] mesh=[2] [q]")),
            "op \"g\": unknown loop var \"q\" (vars: m, n, k)");
  EXPECT_EQ(first_problem(replaced(base, "op s devices=[0,1] mesh=[2] [i]", "op s devices=[0,1] mesh=[2] [j]")),
            "op \"s\": var \"j\" cannot be split: it is opaque in output Y");
  EXPECT_EQ(first_problem(replaced(base, "op g devices=[0,1] mesh=[2] [m]", "op g devices=[0,1] mesh=[2] [k]")),
            "op \"g\": var \"k\" cannot be split: output Y adds terms after summing it, so partial sums do not add up");
  EXPECT_EQ(first_problem(replaced(base, "op r devices=[0,1] mesh=[2] [i]", "op r devices=[0,1] mesh=[2] [j]")),
            "op \"r\": its split vars do not cut output \"f\" into even blocks of whole dims (device 0 writes "
            "[0,496))");
  EXPECT_EQ(first_problem(replaced(base, "tensor h devices=[0,1] mesh=[2] [split(0)]",
                                   "tensor h devices=[0,1] mesh=[2] [replicate]")),
            "tensor \"h\": sharding devices=[0,1] mesh=[2] [replicate] is inconsistent with its producer op \"g\" "
            "(expected devices=[0,1] mesh=[2] [split(0)])");
  EXPECT_EQ(first_problem(replaced(base, "tensor h devices=[0,1]", "tensor h devices=[1,0]")),
            "tensor \"h\": sharding devices=[1,0] mesh=[2] [split(0)] is inconsistent with its producer op \"g\" "
            "(expected devices=[0,1] mesh=[2] [split(0)])");
  EXPECT_EQ(first_problem(replaced(base, "op g devices=[0,1] mesh=[2] [m]", "op g devices=[0,1] mesh=[2] [m,n]")),
            "op \"g\": 2 split vars for a mesh of rank 1");
  // validate_plan reports the first problem and how many others there are.
  try {
    validate_plan(small_graph(), parse_plan(replaced(base, "tensor w ", "tensor ww ")));
    FAIL() << "accepted";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "invalid plan: unknown tensor \"ww\" (and 1 more problems)");
  }
}

// A memo of valid configs (ValidConfigs) changes no line: plans that share configs with earlier ones report the same
// problems with it as without, in any order, and a config that failed is checked again (and fails again).
TEST(PlanValidate, ValidConfigsMemoChangesNoLine) {
  Graph g = small_graph();
  const std::string base = kDataPlan;
  std::vector<std::string> plans{
      base, replaced(base, "op g devices=[0,1] mesh=[2] [m]", "op g devices=[0,1] mesh=[2] [k]"), base,
      replaced(base, "tensor h devices=[0,1]", "tensor h devices=[1,0]"),
      replaced(base, "op g devices=[0,1] mesh=[2] [m]", "op g devices=[0,1] mesh=[2] [k]")};
  ValidConfigs valid;
  for (const std::string &text : plans) {
    Plan p = parse_plan(text);
    EXPECT_EQ(plan_problems(g, p, &valid), plan_problems(g, p)) << text;
  }
  EXPECT_EQ(valid.devices, 2);
  ASSERT_EQ(valid.per_op.size(), static_cast<size_t>(g.num_ops()));
  for (const auto &configs : valid.per_op) EXPECT_EQ(configs.size(), 1u);  // the data plan's, once each
  EXPECT_FALSE(plan_problems(g, parse_plan(plans[1]), &valid).empty());
}

TEST(PlanValidate, TwoDimensionalMeshes) {
  // A 2x2 mesh splitting Gemm's m and n: h is split(0) on axis 0 and split(1) on axis 1; x and w are sources.
  std::string text = "plan devices=4\n"
                     "tensor x devices=[0,1,2,3] mesh=[2,2] [split(0),replicate]\n"
                     "tensor w devices=[0,1,2,3] mesh=[2,2] [replicate,split(0)]\n"
                     "tensor c devices=[0,1,2,3] mesh=[2,2] [replicate,replicate]\n"
                     "tensor h devices=[0,1,2,3] mesh=[2,2] [split(0),split(1)]\n"
                     "tensor p devices=[3,2,1,0] mesh=[4] [split(0)]\n"
                     "tensor f devices=[3,2,1,0] mesh=[4] [split(0)]\n"
                     "op g devices=[0,1,2,3] mesh=[2,2] [m,n]\n"
                     "op s devices=[3,2,1,0] mesh=[4] [i]\n"
                     "op r devices=[3,2,1,0] mesh=[4] [i]\n";
  EXPECT_EQ(plan_problems(small_graph(), parse_plan(text)), std::vector<std::string>{});
  // The same var on both axes divides its extent by 4 (16 / 4 rows each).
  std::string both = replaced(replaced(text, "[m,n]", "[m,m]"), "[split(0),split(1)]", "[split(0),split(0)]");
  EXPECT_EQ(plan_problems(small_graph(), parse_plan(both)), std::vector<std::string>{});
}

Graph training_graph(const std::string &model, int64_t batch) {
  ImportOptions opts;
  opts.batch = batch;
  Graph g = import_onnx(std::string(CLEAVE_SOURCE_DIR) + "/models/" + model, opts);
  build_training_graph(g, TrainOptions{});
  verify(g);
  return g;
}

void check_golden(const std::string &name, const std::string &text) {
  std::string path = std::string(CLEAVE_SOURCE_DIR) + "/tests/planner/golden/" + name;
  const char *update = std::getenv("CLEAVE_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden file " << path << " (run tests/planner/update_golden.sh)";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(text, ss.str()) << "golden " << name << " differs (review, then tests/planner/update_golden.sh)";
}

/** Rules of a data plan: params and optimizer state replicated, inputs/labels split(0), every grad the optimizer
 *  reads partial or (when the op computing it could not split the batch) replicated, updates replicated. */
void check_data_rules(const Graph &g, const Plan &p, int devices) {
  ASSERT_EQ(p.tensors.size(), static_cast<size_t>(g.num_tensors()));
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor &tensor = g.tensor(t);
    const Sharding &s = p.tensors[static_cast<size_t>(t)].sharding;
    SCOPED_TRACE(tensor.name);
    EXPECT_EQ(p.tensors[static_cast<size_t>(t)].name, tensor.name);
    EXPECT_EQ(s.mesh, std::vector<int64_t>{devices});
    if (tensor.role == Role::param || tensor.role == Role::optimizer_state || tensor.role == Role::constant) {
      EXPECT_EQ(s.axes[0].kind, AxisSharding::Kind::replicate);
    }
    if (tensor.role == Role::input || tensor.role == Role::label) {
      EXPECT_EQ(s.axes[0], (AxisSharding{AxisSharding::Kind::split, 0}));
    }
  }
  // The gradients the optimizer reads are never split: partial sums over the batch, or whole.
  for (const Op &op : g.ops()) {
    if (op.phase != Phase::update) continue;
    EXPECT_NE(p.tensors[static_cast<size_t>(op.input(1))].sharding.axes[0].kind, AxisSharding::Kind::split) << op.name;
    EXPECT_EQ(p.ops[static_cast<size_t>(g.find_op(op.name).value())].config.vars, std::vector<std::string>{""});
  }
  // New param values (and BatchNormalization's running statistics) are whole on every device.
  for (const Assign &a : g.assigns) {
    EXPECT_EQ(p.tensors[static_cast<size_t>(a.src)].sharding.axes[0].kind, AxisSharding::Kind::replicate)
        << g.tensor(a.src).name;
  }
}

TEST(Planners, GoldenDataPlans) {
  Graph mlp = training_graph("mlp.onnx", 16);
  Plan pm = make_plan(mlp, "data", 2);
  check_data_rules(mlp, pm, 2);
  check_golden("mlp_data_2.plan", print_plan(pm));
  // Every weight gradient of the MLP is a partial sum over the batch halves.
  for (const char *grad : {"net.0.weight.grad", "net.0.bias.grad", "net.2.weight.grad", "net.2.bias.grad"})
    EXPECT_EQ(pm.tensors[static_cast<size_t>(*mlp.find_tensor(grad))].sharding.axes[0].kind,
              AxisSharding::Kind::partial)
        << grad;

  Graph cnn = training_graph("cnn.onnx", 8);
  Plan pc = make_plan(cnn, "data", 2);
  check_data_rules(cnn, pc, 2);
  check_golden("cnn_data_2.plan", print_plan(pc));
  // Conv and Gemm weight gradients are partial. BatchNormalization's batch dim is synced: the op and its gradient
  // split the batch and all-reduce the statistics, so its scale/bias gradients and running statistics come out whole.
  for (const char *grad : {"net.0.weight.grad", "net.4.weight.grad", "net.9.weight.grad", "net.9.bias.grad"})
    EXPECT_EQ(pc.tensors[static_cast<size_t>(*cnn.find_tensor(grad))].sharding.axes[0].kind,
              AxisSharding::Kind::partial)
        << grad;
  for (const char *t : {"net.1.weight.grad", "net.5.bias.grad", "/net/net.1/BatchNormalization_output_0.saved_mean"})
    EXPECT_EQ(pc.tensors[static_cast<size_t>(*cnn.find_tensor(t))].sharding.axes[0].kind,
              AxisSharding::Kind::replicate)
        << t;
  EXPECT_EQ(pc.tensors[static_cast<size_t>(*cnn.find_tensor("/net/net.1/BatchNormalization_output_0"))].sharding.axes[0],
            (AxisSharding{AxisSharding::Kind::split, 0}));
  // No op of the CNN is left replicated but the optimizer updates: the data plan is data-parallel throughout.
  for (const Op &op : cnn.ops()) {
    const ParallelConfig &c = pc.ops[static_cast<size_t>(*cnn.find_op(op.name))].config;
    if (op.phase == Phase::update) continue;
    EXPECT_NE(c.vars[0], "") << op.name;
  }
}

/** The data plan of `g` on 2 devices, by op name: its split var. */
std::string data_var(const Graph &g, const Plan &p, const std::string &op) {
  return p.ops[static_cast<size_t>(*g.find_op(op))].config.vars.at(0);
}

TEST(Planners, DataSplitsBatchNormAndLossesOnTheBatch) {
  Graph cnn = training_graph("cnn.onnx", 16);
  Plan p = make_plan(cnn, "data", 2);
  for (const char *op : {"/net/net.1/BatchNormalization", "/net/net.5/BatchNormalization.grad"})
    EXPECT_EQ(data_var(cnn, p, op), "b") << op;
  for (const char *op : {"/SoftmaxCrossEntropyLoss", "/SoftmaxCrossEntropyLoss.grad"})
    EXPECT_EQ(data_var(cnn, p, op), "n") << op;
  // torch exports ignore_index=-100, so the CNN's loss is a weighted mean: whole on every rank (synced).
  EXPECT_EQ(p.tensors[static_cast<size_t>(*cnn.find_tensor("loss"))].sharding.axes[0].kind,
            AxisSharding::Kind::replicate);

  // A weighted mean (ignore_index and class weights) divides by the total weight of the kept labels: its positions
  // are synced, so the loss comes out whole and its gradient split; softmax splits on its non-axis var.
  Graph g = parse_graph(R"(graph wl
tensor x f32[8,5] input
tensor y i64[8] label
tensor w f32[5] constant = [0.5,1,1.5,2,2.5]
tensor s f32[8,5] activation
tensor loss f32[] activation
tensor dl f32[] constant = [1]
tensor plain f32[] activation
tensor ds f32[8,5] grad
op sm LogSoftmax forward (x) -> (s) {axis=1}
op sce NegativeLogLikelihoodLoss forward (s, y, w) -> (loss) {ignore_index=1, reduction="mean"}
op sceg NegativeLogLikelihoodLossGrad backward (dl, s, y, w) -> (ds) {ignore_index=1, reduction="mean"}
op plainmean NegativeLogLikelihoodLoss forward (s, y) -> (plain) {reduction="mean"}
)");
  verify(g);
  Plan w = make_plan(g, "data", 2);
  EXPECT_EQ(data_var(g, w, "sm"), "i");
  EXPECT_EQ(data_var(g, w, "sce"), "n");
  EXPECT_EQ(data_var(g, w, "sceg"), "n");
  EXPECT_EQ(w.tensors[static_cast<size_t>(*g.find_tensor("loss"))].sharding.axes[0].kind, AxisSharding::Kind::replicate);
  EXPECT_EQ(w.tensors[static_cast<size_t>(*g.find_tensor("ds"))].sharding.axes[0],
            (AxisSharding{AxisSharding::Kind::split, 0}));
  // A plain mean (no weights, no ignore_index) is an ordinary partial sum over the batch halves.
  EXPECT_EQ(data_var(g, w, "plainmean"), "n");
  EXPECT_EQ(w.tensors[static_cast<size_t>(*g.find_tensor("plain"))].sharding.axes[0].kind,
            AxisSharding::Kind::partial);
}

TEST(Planners, DataSplitsBatchMeansAndOnlyWhatCodegenLowers) {
  // A mean over the batch splits like a sum: each rank's output is its share of the global mean (codegen divides by
  // the whole reduced count), partial until all-reduced. A max over it does not split; nor does a MaxPool with
  // Indices, which config_problems accepts on the batch but codegen refuses: the data planner consults
  // codegen_supports as every planner does, so it replicates the op.
  Graph g = parse_graph(R"(graph bm
tensor x f32[4,3,2,2] input
tensor m f32[1,3,1,1] activation
tensor m0 f32[3,2,2] activation
tensor mx f32[1,3,1,1] activation
tensor p f32[4,3,1,1] activation
tensor pi i64[4,3,1,1] activation
op mean ReduceMean forward (x) -> (m) {axes=[0,2,3], keepdims=1}
op mean0 ReduceMean forward (x) -> (m0) {axes=[0], keepdims=0}
op max ReduceMax forward (x) -> (mx) {axes=[0,2,3], keepdims=1}
op pool MaxPool forward (x) -> (p, pi) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], storage_order=0, strides=[2,2]}
)");
  verify(g);
  Plan p = make_plan(g, "data", 2);
  for (const char *op : {"mean", "mean0"}) {
    EXPECT_EQ(data_var(g, p, op), "i") << op;
    const Op &o = g.op(*g.find_op(op));
    EXPECT_TRUE(codegen_supports(g, o, describe::describe(g, o), ParallelConfig{{0, 1}, {2}, {"i"}})) << op;
  }
  EXPECT_EQ(p.tensors[static_cast<size_t>(*g.find_tensor("m"))].sharding.axes[0].kind, AxisSharding::Kind::partial);
  EXPECT_EQ(p.tensors[static_cast<size_t>(*g.find_tensor("m0"))].sharding.axes[0].kind, AxisSharding::Kind::partial);
  EXPECT_EQ(data_var(g, p, "max"), "");
  EXPECT_EQ(data_var(g, p, "pool"), "");
  EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
}

TEST(PlanValidate, SyncedVarsSplitButOpaqueOnesDoNot) {
  Graph g = describe::example_op(OpKind::BatchNormalization);
  const Op &op = g.op(0);
  std::vector<describe::Description> descs = describe::describe(g, op);
  // Splitting the synced batch var: Y split(0), the four statistics whole.
  ParallelConfig b{{0, 1}, {2}, {"b"}};
  EXPECT_EQ(config_problems(g, op, descs, b, 2), std::vector<std::string>{});
  EXPECT_EQ(implied_sharding(op, descs, b, 0).axes[0], (AxisSharding{AxisSharding::Kind::split, 0}));
  for (size_t k = 1; k <= 4; ++k) EXPECT_EQ(implied_sharding(op, descs, b, k).axes[0].kind, AxisSharding::Kind::replicate);
  // Softmax's axis is opaque but not synced: still refused.
  Graph s = describe::example_op(OpKind::Softmax);
  std::vector<describe::Description> sd = describe::describe(s, s.op(0));
  EXPECT_EQ(config_problems(s, s.op(0), sd, ParallelConfig{{0, 1}, {2}, {"j"}}, 2),
            std::vector<std::string>{"op \"Softmax\": var \"j\" cannot be split: it is opaque in output Y"});
}

TEST(Planners, DeterministicAndValid) {
  for (const char *model : {"mlp.onnx", "cnn.onnx"})
    for (const char *planner : {"single", "data"})
      for (int devices : {1, 2, 4}) {
        SCOPED_TRACE(std::string(model) + " " + planner + " " + std::to_string(devices));
        std::string a = print_plan(make_plan(training_graph(model, 8), planner, devices));
        std::string b = print_plan(make_plan(training_graph(model, 8), planner, devices));
        EXPECT_EQ(a, b);
        EXPECT_EQ(print_plan(parse_plan(a)), a);
        EXPECT_EQ(plan_problems(training_graph(model, 8), parse_plan(a)), std::vector<std::string>{});
      }
}

TEST(Planners, SinglePutsEverythingOnDeviceZero) {
  Graph g = small_graph();
  Plan p = make_plan(g, "single", 3);
  EXPECT_EQ(print_plan(p), "plan devices=3\n"
                           "tensor x devices=[0] mesh=[1] [replicate]\n"
                           "tensor w devices=[0] mesh=[1] [replicate]\n"
                           "tensor c devices=[0] mesh=[1] [replicate]\n"
                           "tensor h devices=[0] mesh=[1] [replicate]\n"
                           "tensor p devices=[0] mesh=[1] [replicate]\n"
                           "tensor f devices=[0] mesh=[1] [replicate]\n"
                           "op g devices=[0] mesh=[1] [-]\n"
                           "op s devices=[0] mesh=[1] [-]\n"
                           "op r devices=[0] mesh=[1] [-]\n");
}

TEST(Planners, UserErrors) {
  Graph g = small_graph();
  auto error = [&](const std::string &planner, int devices) {
    try {
      make_plan(g, planner, devices);
    } catch (const UserError &e) {
      return std::string(e.what());
    }
    return std::string("(planned)");
  };
  EXPECT_EQ(error("mcmc", 2), "unknown planner \"mcmc\" (expected single, data, tofu, icml18, owt, allrow, "
                             "spartan, equalchop, random, flexflow or frontier)");
  EXPECT_EQ(error("data", 3), "data planner: batch 16 of input \"x\" is not divisible by 3 devices");
  EXPECT_EQ(error("data", 0), "device count 0 must be at least 1");
}

TEST(Planners, BatchDimsPropagate) {
  Graph g = training_graph("cnn.onnx", 8);
  std::vector<int> batch = batch_dims(g);
  // Activations and their gradients carry the batch in dim 0; params, their grads and the scalar loss do not.
  for (const char *t : {"x", "y", "/net/net.1/BatchNormalization_output_0", "/net/net.8/Flatten_output_0",
                        "loss.log_prob", "/net/net.3/MaxPool_output_0.grad"})
    EXPECT_EQ(batch[static_cast<size_t>(*g.find_tensor(t))], 0) << t;
  for (const char *t : {"net.0.weight", "net.0.weight.grad", "net.1.weight.grad", "loss",
                        "/net/net.1/BatchNormalization_output_0.saved_mean"})
    EXPECT_EQ(batch[static_cast<size_t>(*g.find_tensor(t))], -1) << t;
}

TEST(Planners, TimeMajorDataSplitsItsSampleAxis) {
  // An RNN-style graph whose input and labels are time-major ([T, B, F], [T, B]): data splits dim 1, the batch follows
  // it through the ops, and every planner keeps graph data split on the sample axis only.
  Graph g = parse_graph(R"(graph g
tensor x f32[3,8,4] input samples=1
tensor y f32[3,8,2] label samples=1
tensor w f32[4,2] param
tensor h f32[3,8,2] activation
tensor d f32[3,8,2] activation
tensor sq f32[3,8,2] activation
tensor loss f32[] activation
op mm MatMul forward (x, w) -> (h)
op sub Sub forward (h, y) -> (d)
op sq Mul forward (d, d) -> (sq)
op l ReduceSum forward (sq) -> (loss) {axes=[0,1,2], keepdims=0}
loss loss
)");
  std::vector<int> batch = batch_dims(g);
  for (const char *t : {"x", "y", "h", "d"}) EXPECT_EQ(batch[static_cast<size_t>(*g.find_tensor(t))], 1) << t;
  EXPECT_EQ(batch[static_cast<size_t>(*g.find_tensor("w"))], -1);
  Plan p = data_plan(g, 2);
  EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
  auto sharding = [&](const std::string &name) {
    for (const TensorEntry &e : p.tensors)
      if (e.name == name) return sharding_axes_str(e.sharding);
    return std::string("?");
  };
  EXPECT_EQ(sharding("x"), "[split(1)]");
  EXPECT_EQ(sharding("y"), "[split(1)]");
  EXPECT_EQ(sharding("h"), "[split(1)]");
  for (const char *planner : {"tofu", "random", "frontier"}) {
    Plan q = make_plan(g, planner, 2);
    for (const TensorEntry &e : q.tensors) {
      const Tensor &t = g.tensor(*g.find_tensor(e.name));
      if (is_data(t)) EXPECT_TRUE(source_sharding_supported(t, e.sharding)) << planner << " " << e.name;
    }
  }
  g.tensor(*g.find_tensor("x")).shape[1] = 7;
  g.tensor(*g.find_tensor("y")).shape[1] = 7;
  try {
    data_plan(g, 2);
    FAIL() << "no error for a batch of 7 on 2 devices";
  } catch (const UserError &e) {
    EXPECT_EQ(std::string(e.what()), "data planner: batch 7 of input \"x\" (dim 1) is not divisible by 2 devices");
  }
}

TEST(Planners, DataSplitsAttentionHeadsAndFlattenedRows) {
  // torch's attention regroups [T, B, H*D] into [T, B*H, D] and back, and its Linear layers flatten [B, T, C] into
  // rows and back: each is a block of samples on both sides, so the data planner splits every op (the regrouping is
  // affine over its common pieces; the unflattening's batch var is the rows' outer factor).
  Graph g = parse_graph(R"(graph g
tensor x f32[4,3,8] input
tensor t f32[3,4,8] activation
tensor h f32[3,8,4] activation
tensor r f32[3,8,4] activation
tensor u f32[3,4,8] activation
tensor v f32[4,3,8] activation
tensor rows f32[12,8] activation
tensor back f32[4,3,8] activation
tensor loss f32[] activation
op tr Transpose forward (x) -> (t) {perm=[1,0,2]}
op heads Reshape forward (t) -> (h) {shape=[3,8,4]}
op relu Relu forward (h) -> (r)
op merge Reshape forward (r) -> (u) {shape=[3,4,8]}
op tr2 Transpose forward (u) -> (v) {perm=[1,0,2]}
op flat Reshape forward (v) -> (rows) {shape=[12,8]}
op unflat Reshape forward (rows) -> (back) {shape=[4,3,8]}
op l ReduceSum forward (back) -> (loss) {axes=[0,1,2], keepdims=0}
loss loss
)");
  std::vector<int> batch = batch_dims(g);
  for (auto [t, dim] : std::vector<std::pair<const char *, int>>{
           {"x", 0}, {"t", 1}, {"h", 1}, {"u", 1}, {"v", 0}, {"rows", 0}, {"back", 0}})
    EXPECT_EQ(batch[static_cast<size_t>(*g.find_tensor(t))], dim) << t;
  Plan p = data_plan(g, 2);
  EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
  for (const OpEntry &op : p.ops) EXPECT_NE(op.config.vars[0], "") << op.name << " is replicated";
}

}  // namespace
}  // namespace cleave::plan

namespace cleave::plan {
namespace {

TEST(Planners, EveryKindsExamplePlansAndValidates) {
  // Both planners on a one-op graph of every kind: the result validates, or (data) the batch does not divide.
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    Graph g = describe::example_op(kind);
    for (int devices : {1, 2, 3}) {
      EXPECT_EQ(plan_problems(g, make_plan(g, "single", devices)), std::vector<std::string>{});
      try {
        Plan p = make_plan(g, "data", devices);
        EXPECT_EQ(plan_problems(g, parse_plan(print_plan(p))), std::vector<std::string>{});
      } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("is not divisible by"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Planners, EverySplittableVarOfEveryKindValidatesOrSaysWhy) {
  // Each var split over 2 devices: valid exactly when nothing stands in its way (opaque, non-sum reduction,
  // non-linear post, odd extent, an output not cut into even blocks), never an internal error.
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    Graph g = describe::example_op(kind);
    const Op &op = g.op(0);
    std::vector<describe::Description> descs = describe::describe(g, op);
    const describe::Description &d = descs[primary_output(op)];
    for (const describe::LoopVar &v : d.vars) {
      SCOPED_TRACE(std::string(op_kind_name(kind)) + " var " + v.name);
      ParallelConfig c{{0, 1}, {2}, {v.name}};
      std::vector<std::string> problems = config_problems(g, op, descs, c, 2);
      bool obstacle = !split_obstacle(d, v.name).empty() || v.extent % 2 != 0;
      if (obstacle) {
        EXPECT_FALSE(problems.empty());
      } else if (!problems.empty()) {
        EXPECT_NE(problems[0].find("do not cut output"), std::string::npos) << problems[0];
      }
      if (problems.empty() && describe::split_kind(d, d.var(v.name)) == describe::SplitKind::concat) {
        EXPECT_EQ(implied_sharding(op, descs, c, primary_output(op)).axes[0].kind, AxisSharding::Kind::split);
      }
    }
  }
}

}  // namespace
}  // namespace cleave::plan

namespace cleave::plan {
namespace {

TEST(Planners, DataPlanKeepsTheUpdateOfABatchShapedParameterWhole) {
  // torch.bmm(x, w) with a parameter w [B, K, N]: w's gradient is split by the batch (each sample's slice of w gets its
  // own sample's gradient), yet w lives whole on every device. The update reads the gathered gradient, so its new
  // value is whole where the assign stores it (a split update was "assign across shardings" in codegen).
  Graph g = parse_graph(R"(graph g
tensor x f32[2,3,4] input
tensor w f32[2,4,5] param
tensor h f32[2,3,5] activation
tensor loss f32[] activation
op bmm MatMul forward (x, w) -> (h)
op l ReduceSum forward (h) -> (loss) {axes=[0,1,2], keepdims=0}
output loss
)");
  build_training_graph(g, TrainOptions{});
  verify(g);
  EXPECT_EQ(batch_dims(g)[static_cast<size_t>(*g.find_tensor("w.grad"))], 0);
  Plan p = data_plan(g, 2);
  EXPECT_EQ(plan_problems(g, p), std::vector<std::string>{});
  EXPECT_EQ(data_var(g, p, "bmm"), "b");
  auto kind = [&](const std::string &t) {
    return p.tensors[static_cast<size_t>(*g.find_tensor(t))].sharding.axes[0].kind;
  };
  EXPECT_EQ(kind("w.grad"), AxisSharding::Kind::split);
  for (const Op &op : g.ops())
    if (op.phase == Phase::update) EXPECT_EQ(data_var(g, p, op.name), "") << op.name;
  ASSERT_EQ(g.assigns.size(), 1u);
  EXPECT_EQ(p.tensors[static_cast<size_t>(g.assigns[0].src)].sharding.axes[0].kind, AxisSharding::Kind::replicate);
}

}  // namespace
}  // namespace cleave::plan
