// Region analysis vs brute force: enumerate every point of the var ranges, evaluate each access's index exactly (as
// the description semantics in ir/describe/description.h define it), keep the in-range ones, and compare the min/max
// per dim with op_region. Ops: every kind's example plus Conv/pool/slice variants written as IR text.
#include <gtest/gtest.h>

#include <random>

#include "ir/describe/description.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "planner/plan/region.h"

namespace cleave::plan {
namespace {

using describe::Description;
using describe::Expr;
using describe::ExprPtr;

void accesses(const ExprPtr &e, std::vector<const Expr *> &out) {
  if (!e) return;
  if (e->kind == Expr::Kind::access) out.push_back(e.get());
  for (const ExprPtr &a : e->args) accesses(a, out);
  for (const describe::Index &i : e->index) accesses(i.indirect, out);
}

int64_t eval_affine(const describe::Affine &a, const std::vector<int64_t> &vals) {
  int64_t r = a.constant;
  for (const auto &[v, c] : a.terms) r += c * vals[static_cast<size_t>(v)];
  return r;
}

/** Bounding boxes by enumeration. Indirect index dims count as the whole dim (their values are data). */
OpRegion brute_force(const Description &d, const std::vector<Interval> &ranges) {
  std::vector<const Expr *> acc;
  accesses(d.body, acc);
  accesses(d.post, acc);
  OpRegion r;
  std::vector<bool> seen(d.operands.size(), false);
  for (const auto &o : d.operands) r.operands.push_back({o.slot, o.name, Box(o.shape.size(), Interval{0, 0})});
  bool out_seen = false;
  r.output = Box(d.output_shape.size(), Interval{0, 0});
  auto widen = [](Box &b, size_t k, int64_t i, bool first) {
    if (first) b[k] = {i, i + 1};
    else b[k] = {std::min(b[k].begin, i), std::max(b[k].end, i + 1)};
  };
  std::vector<int64_t> vals(d.vars.size());
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = ranges[i].begin;
  for (const Interval &iv : ranges)
    if (iv.empty()) return r;
  for (;;) {
    for (size_t k = 0; k < d.output_index.size(); ++k) widen(r.output, k, eval_affine(d.output_index[k], vals), !out_seen);
    out_seen = true;
    for (const Expr *e : acc) {
      size_t op = 0;
      while (d.operands[op].slot != e->slot) ++op;
      const Shape &shape = d.operands[op].shape;
      std::vector<std::pair<int64_t, int64_t>> pos;  // per dim: [lo, hi] read
      bool inside = true;
      for (size_t k = 0; k < e->index.size() && inside; ++k) {
        const describe::Index &ix = e->index[k];
        if (ix.indirect) {
          pos.push_back({0, shape[k] - 1});
          continue;
        }
        int64_t i = eval_affine(ix.affine, vals);
        if (i % ix.div != 0) inside = false;
        i /= ix.div;
        if (i < 0 || i >= shape[k]) inside = false;
        pos.push_back({i, i});
      }
      if (!inside) continue;
      for (size_t k = 0; k < pos.size(); ++k) {
        widen(r.operands[op].box, k, pos[k].first, !seen[op]);
        r.operands[op].box[k].end = std::max(r.operands[op].box[k].end, pos[k].second + 1);
      }
      seen[op] = true;
    }
    size_t k = 0;
    while (k < vals.size() && vals[k] == ranges[k].end - 1) vals[k] = ranges[k].begin, ++k;
    if (k == vals.size()) break;
    ++vals[k];
  }
  for (size_t i = 0; i < d.vars.size(); ++i)
    // A synced reduction var is all-reduced inside the kernel: restricting it leaves the output whole.
    if (d.vars[i].role == describe::VarRole::reduction && !d.vars[i].synced && ranges[i] != Interval{0, d.vars[i].extent})
      r.partial = true;
  return r;
}

/** Random sub-ranges for the splittable-looking vars (opaque ones keep their extent). */
std::vector<Interval> random_ranges(const Description &d, std::mt19937 &rng, bool full) {
  std::vector<Interval> r;
  for (const describe::LoopVar &v : d.vars) {
    if (full || v.opaque || v.extent == 1 || rng() % 3 == 0) {
      r.push_back({0, v.extent});
      continue;
    }
    int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(v.extent));
    int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(v.extent));
    r.push_back({std::min(a, b), std::max(a, b) + 1});
  }
  return r;
}

std::string ranges_str(const Description &d, const std::vector<Interval> &r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i)
    s += d.vars[i].name + "=[" + std::to_string(r[i].begin) + "," + std::to_string(r[i].end) + ") ";
  return s;
}

void check_graph(const Graph &g, int trials, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Op &op : g.ops()) {
    std::vector<Description> ds = describe::describe(g, op);
    for (const Description &d : ds) {
      if (!d.body) continue;
      for (int t = 0; t < trials; ++t) {
        std::vector<Interval> ranges = random_ranges(d, rng, t == 0);
        OpRegion want = brute_force(d, ranges), have = op_region(d, ranges);
        SCOPED_TRACE(op.name + " output " + d.output_name + " " + describe::to_string(d) + " with " +
                     ranges_str(d, ranges));
        EXPECT_EQ(box_str(have.output), box_str(want.output));
        EXPECT_EQ(have.partial, want.partial);
        ASSERT_EQ(have.operands.size(), want.operands.size());
        for (size_t i = 0; i < want.operands.size(); ++i) {
          bool want_empty = box_empty(want.operands[i].box), have_empty = box_empty(have.operands[i].box);
          EXPECT_EQ(have_empty, want_empty) << want.operands[i].name;
          if (!want_empty) {
            EXPECT_EQ(box_str(have.operands[i].box), box_str(want.operands[i].box)) << want.operands[i].name;
          }
        }
      }
    }
  }
}

TEST(Region, EveryKindsExampleMatchesBruteForce) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    SCOPED_TRACE(std::string(op_kind_name(kind)));
    check_graph(describe::example_op(kind), 12, 1000u + static_cast<uint32_t>(k));
  }
}

Graph parse_checked(const std::string &text) {
  Graph g = parse_graph(text);
  verify(g);
  return g;
}

TEST(Region, WindowVariantsMatchBruteForce) {
  // Strides, asymmetric pads, dilations, groups, 1-D and 3-D windows, ceil_mode, windows whose taps skip inputs
  // (stride > kernel), and the transposed windows of their gradients.
  Graph g = parse_checked(R"(graph windows
tensor x f32[2,4,11,9] input
tensor w f32[6,2,3,2] param
tensor y f32[2,6,5,5] activation
tensor dx f32[2,4,11,9] grad
tensor dw f32[6,2,3,2] grad
tensor x1 f32[2,3,13] input
tensor w1 f32[4,3,1] param
tensor y1 f32[2,4,5] activation
tensor dx1 f32[2,3,13] grad
tensor p f32[2,4,4,5] activation
tensor dp f32[2,4,11,9] grad
tensor a f32[2,4,6,5] activation
tensor x3 f32[1,2,5,6,4] input
tensor w3 f32[2,2,2,3,2] param
tensor y3 f32[1,2,4,3,3] activation
op conv Conv forward (x, w) -> (y) {dilations=[2,1], group=2, pads=[1,0,2,1], strides=[2,2]}
op conv.gd ConvGradData backward group=conv (y, w) -> (dx) {dilations=[2,1], group=2, pads=[1,0,2,1], strides=[2,2]}
op conv.gf ConvGradFilter backward group=conv (y, x) -> (dw) {dilations=[2,1], group=2, pads=[1,0,2,1], strides=[2,2]}
op conv1 Conv forward (x1, w1) -> (y1) {dilations=[1], group=1, pads=[1,0], strides=[3]}
op conv1.gd ConvGradData backward group=conv1 (y1, w1) -> (dx1) {dilations=[1], group=1, pads=[1,0], strides=[3]}
op pool MaxPool forward (x) -> (p) {ceil_mode=1, dilations=[1,2], kernel_shape=[3,2], pads=[1,1,0,0], storage_order=0, strides=[3,2]}
op pool.g MaxPoolGrad backward group=pool (p, x) -> (dp) {ceil_mode=1, dilations=[1,2], kernel_shape=[3,2], pads=[1,1,0,0], storage_order=0, strides=[3,2]}
op avg AveragePool forward (x) -> (a) {ceil_mode=0, count_include_pad=1, kernel_shape=[2,3], pads=[1,1,1,1], strides=[2,2]}
op conv3 Conv forward (x3, w3) -> (y3) {dilations=[1,1,1], group=1, pads=[0,1,0,0,1,0], strides=[1,2,1]}
)");
  check_graph(g, 25, 7);
}

TEST(Region, LayoutVariantsMatchBruteForce) {
  Graph g = parse_checked(R"(graph layout
tensor x f32[6,10] input
tensor s f32[2,4] activation
tensor sg f32[6,10] grad
tensor n f32[3,5] activation
tensor t f32[10,6] activation
tensor r f32[3,2,10] activation
tensor c f32[6,20] activation
tensor m f32[6,6] activation
tensor sg2 f32[6,10] grad
tensor sg3 f32[6,10] grad
op slice Slice forward (x) -> (s) {axes=[0,1], ends=[5,9], starts=[1,1], steps=[2,2]}
op slice.g SliceGrad backward group=slice (s) -> (sg) {axes=[0,1], ends=[5,9], starts=[1,1], steps=[2,2]}
op neg Slice forward (x) -> (n) {axes=[0,1], ends=[0,0], starts=[5,9], steps=[-2,-2]}
op neg.g SliceGrad backward group=neg (n) -> (sg2) {axes=[0,1], ends=[0,0], starts=[5,9], steps=[-2,-2]}
op flip.g SliceGrad backward group=neg (x) -> (sg3) {axes=[1], ends=[-11], starts=[9], steps=[-1]}
op tr Transpose forward (x) -> (t) {perm=[1,0]}
op rs Reshape forward (x) -> (r) {shape=[3,2,10]}
op cat Concat forward (x, x) -> (c) {axis=1}
op mm MatMul forward (x, t) -> (m)
)");
  check_graph(g, 25, 11);
}

TEST(Region, ReshapeBoxesKeepTheirOrder) {
  // [T, B, H*D] -> [T, B*H, D] (attention's heads): a block of B on both sides is one buffer; a block of H is not.
  Shape x{4, 6, 12}, y{4, 18, 4};  // B 6, H 3, D 4
  EXPECT_TRUE(reshape_boxes_ok({{0, 4}, {0, 3}, {0, 12}}, x, {{0, 4}, {0, 9}, {0, 4}}, y));
  EXPECT_TRUE(reshape_boxes_ok({{0, 4}, {3, 6}, {0, 12}}, x, {{0, 4}, {9, 18}, {0, 4}}, y));
  EXPECT_FALSE(reshape_boxes_ok({{0, 4}, {0, 3}, {0, 12}}, x, {{0, 4}, {0, 18}, {0, 2}}, y));
  EXPECT_FALSE(reshape_boxes_ok({{0, 4}, {0, 6}, {0, 4}}, x, {{0, 4}, {0, 6}, {0, 4}}, y));  // H*D cut inside
  // Flattening and unflattening rows: a block of rows; unit dims dropped or inserted; the whole tensor.
  EXPECT_TRUE(reshape_boxes_ok({{2, 4}, {0, 6}, {0, 12}}, x, {{2, 4}, {0, 72}}, {4, 72}));
  EXPECT_TRUE(reshape_boxes_ok({{0, 4}, {0, 3}, {0, 12}}, x, {{0, 4}, {0, 36}}, {4, 72}));
  EXPECT_FALSE(reshape_boxes_ok({{0, 4}, {0, 3}, {0, 12}}, x, {{0, 4}, {36, 72}}, {4, 72}));
  EXPECT_TRUE(reshape_boxes_ok({{0, 2}, {0, 1}, {0, 5}}, {4, 1, 5}, {{0, 2}, {0, 5}}, {4, 5}));
  EXPECT_TRUE(reshape_boxes_ok(full_box(x), x, full_box(y), y));
  // [B*T, C] -> [B, T, C] split on B: the rows of a block of samples.
  EXPECT_TRUE(reshape_boxes_ok({{6, 12}, {0, 5}}, {12, 5}, {{2, 4}, {0, 3}, {0, 5}}, {4, 3, 5}));
  EXPECT_FALSE(reshape_boxes_ok({{0, 6}, {0, 5}}, {12, 5}, {{2, 4}, {0, 3}, {0, 5}}, {4, 3, 5}));
}

TEST(Region, ShardRegionsTileTheTensor) {
  // Whatever the mesh, the split axes' blocks cover every element exactly once per replica.
  Shape shape{12, 6, 4};
  struct Case {
    std::vector<int64_t> mesh;
    std::vector<AxisSharding> axes;
    int replicas;
  };
  using K = AxisSharding::Kind;
  std::vector<Case> cases = {
      {{2, 3}, {{K::split, 0}, {K::split, 1}}, 1},
      {{2, 2}, {{K::split, 0}, {K::split, 0}}, 1},
      {{3, 2}, {{K::split, 0}, {K::replicate, -1}}, 2},
      {{2, 2}, {{K::partial, -1}, {K::split, 2}}, 2},
      {{4}, {{K::replicate, -1}}, 4},
  };
  for (const Case &c : cases) {
    Sharding s;
    s.mesh = c.mesh;
    s.axes = c.axes;
    int64_t n = 1;
    for (int64_t m : c.mesh) n *= m;
    std::vector<int> count(static_cast<size_t>(num_elements(shape)), 0);
    for (int64_t i = 0; i < n; ++i) {
      Box b = shard_region(shape, s, i);
      for (int64_t x = b[0].begin; x < b[0].end; ++x)
        for (int64_t y = b[1].begin; y < b[1].end; ++y)
          for (int64_t z = b[2].begin; z < b[2].end; ++z) ++count[static_cast<size_t>((x * 6 + y) * 4 + z)];
    }
    for (int v : count) ASSERT_EQ(v, c.replicas) << sharding_axes_str(s);
  }
}

TEST(Region, ShardRegionIsRowMajorOverTheMesh) {
  // Device 3 of a [2,2] mesh sits at (1,1); with dim 0 split on both axes, axis 0 is the more significant: block 3.
  Sharding s;
  s.mesh = {2, 2};
  s.axes = {{AxisSharding::Kind::split, 0}, {AxisSharding::Kind::split, 0}};
  EXPECT_EQ(box_str(shard_region({8, 5}, s, 1)), "[2,4)x[0,5)");
  EXPECT_EQ(box_str(shard_region({8, 5}, s, 3)), "[6,8)x[0,5)");
  s.axes = {{AxisSharding::Kind::split, 1}, {AxisSharding::Kind::split, 0}};
  EXPECT_EQ(box_str(shard_region({8, 6}, s, 1)), "[4,8)x[0,3)");
  EXPECT_EQ(box_str(shard_region({8, 6}, s, 2)), "[0,4)x[3,6)");
}

TEST(Region, DataSplitOfAConvReadsItsShardAndHalo) {
  // Splitting a 3x3 pad-1 conv over its output rows y in 2: device 1 writes rows [4,8) and reads input rows [3,8)
  // (one halo row above, the bottom padding needs none).
  Graph g = parse_checked(R"(graph c
tensor x f32[2,3,8,8] input
tensor w f32[4,3,3,3] param
tensor y f32[2,4,8,8] activation
op conv Conv forward (x, w) -> (y) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]}
)");
  Description d = describe::describe(g, g.op(0))[0];
  ParallelConfig c{{0, 1}, {2}, {"y"}};
  OpRegion r = op_region(d, var_ranges(d, c, 1));
  EXPECT_EQ(box_str(r.output), "[0,2)x[0,4)x[4,8)x[0,8)");
  EXPECT_EQ(box_str(r.operands[0].box), "[0,2)x[0,3)x[3,8)x[0,8)");
  EXPECT_EQ(box_str(r.operands[1].box), "[0,4)x[0,3)x[0,3)x[0,3)");
  EXPECT_FALSE(r.partial);
  std::vector<Interval> ranges = var_ranges(d, ParallelConfig{{0}, {1}, {""}}, 0);
  ranges[static_cast<size_t>(d.var("ci"))] = {0, 1};
  r = op_region(d, ranges);
  EXPECT_TRUE(r.partial);
  EXPECT_EQ(box_str(r.operands[1].box), "[0,4)x[0,1)x[0,3)x[0,3)");
}

TEST(Region, SyncedBatchOfBatchNormReadsOnlyItsShard) {
  // BatchNormalization split on its synced batch var b: device 1 reads and writes batch rows [4,8) only, and its
  // statistics are whole outputs (the kernel all-reduces), not partial sums.
  Graph g = describe::example_op(OpKind::BatchNormalization);
  std::vector<Description> ds = describe::describe(g, g.op(0));
  ParallelConfig c{{0, 1}, {2}, {"b"}};
  OpRegion y = op_region(ds[0], var_ranges(ds[0], c, 1));
  EXPECT_EQ(box_str(y.output), "[4,8)x[0,3)x[0,16)x[0,16)");
  EXPECT_EQ(box_str(y.operands[0].box), "[4,8)x[0,3)x[0,16)x[0,16)");
  for (size_t k = 1; k <= 4; ++k) {
    OpRegion st = op_region(ds[k], var_ranges(ds[k], c, 1));
    EXPECT_EQ(box_str(st.output), "[0,3)") << ds[k].output_name;
    EXPECT_EQ(box_str(st.operands[0].box), "[4,8)x[0,3)x[0,16)x[0,16)") << ds[k].output_name;
    EXPECT_FALSE(st.partial) << ds[k].output_name;
  }
}

TEST(Region, InputRegionsCoverEveryOutput) {
  // SoftmaxCrossEntropyLoss split over its batch var n: device 1 reads rows [2,4) of the scores and labels for both
  // the loss (a partial sum) and log_prob.
  Graph g = describe::example_op(OpKind::SoftmaxCrossEntropyLoss);
  std::vector<std::optional<Box>> r = op_input_regions(g, g.op(0), ParallelConfig{{0, 1}, {2}, {"n"}}, 1);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_TRUE(r[0] && r[1]);
  EXPECT_EQ(box_str(*r[0]), "[2,4)x[0,10)");
  EXPECT_EQ(box_str(*r[1]), "[2,4)");
  // A slice reading only the second half of its input: the device holding the first output row reads row 1 only.
  Graph s = parse_checked(R"(graph s
tensor x f32[4,6] input
tensor y f32[2,6] activation
op sl Slice forward (x) -> (y) {axes=[0], ends=[4], starts=[1], steps=[2]}
)");
  r = op_input_regions(s, s.op(0), ParallelConfig{{0, 1}, {2}, {"i"}}, 0);
  ASSERT_TRUE(r[0]);
  EXPECT_EQ(box_str(*r[0]), "[1,2)x[0,6)");
}

}  // namespace
}  // namespace cleave::plan
