// The batch-split kernels that synchronise inside (BatchNorm forward/backward, the weighted-mean losses' weight
// total) on the world's ranks, each holding a block of batch rows, against the whole-batch kernels every rank runs
// on the whole batch (those are checked against the reference interpreter by test_runtime). Run by CTest under
// mpirun with 2 and 4 ranks; a mismatch fails the job through rt::fail naming the output and element.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace rt = cleave::rt;

namespace {

std::vector<float> random(std::mt19937 &rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v) x = u(rng);
  return v;
}

/** got[i] (this rank's block, or the whole statistic) vs want[offset + i], relative to max(1, |want|). */
void expect_near(const std::string &what, const float *got, const float *want, int64_t count, double tol) {
  for (int64_t i = 0; i < count; ++i) {
    double err = std::fabs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::fabs(static_cast<double>(want[i])));
    if (!(err <= tol))
      rt::fail(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
               std::to_string(want[i]));
  }
}

void check_batch_norm(const rt::Comm &g, int64_t rows, int64_t c, int64_t d) {
  int64_t n = rows * g.size(), block = rows * c * d, off = g.index * block;
  std::mt19937 rng(static_cast<unsigned>(n * 31 + c));  // the same data on every rank
  // A mean far from 0 relative to the spread: a one-pass variance would lose digits here.
  auto x = random(rng, n * c * d, 40, 44), scale = random(rng, c, 0.5, 2), bias = random(rng, c, -1, 1);
  auto rm = random(rng, c, -1, 1), rv = random(rng, c, 0.5, 2), dy = random(rng, n * c * d, -1, 1);
  std::vector<float> y(x.size()), wrm = rm, wrv = rv, mean(static_cast<size_t>(c)), invstd(mean.size());
  rt::batch_norm_train_forward(n, c, d, x.data(), scale.data(), bias.data(), 1e-5f, 0.9f, y.data(), wrm.data(),
                               wrv.data(), mean.data(), invstd.data());
  std::vector<float> dx(x.size()), ds(mean.size()), db(mean.size());
  rt::batch_norm_backward(n, c, d, dy.data(), x.data(), scale.data(), mean.data(), invstd.data(), dx.data(), ds.data(),
                          db.data());
  // This rank's rows (the layout [n, c, d] keeps a block of rows contiguous).
  std::vector<float> sy(static_cast<size_t>(block)), srm = rm, srv = rv, sm(mean.size()), si(mean.size());
  rt::batch_norm_train_forward_synced(g, n * d, rows, c, d, x.data() + off, scale.data(), bias.data(), 1e-5f, 0.9f,
                                      sy.data(), srm.data(), srv.data(), sm.data(), si.data());
  std::string at = "batch_norm (n=" + std::to_string(n) + ", c=" + std::to_string(c) + ", d=" + std::to_string(d) + ") ";
  expect_near(at + "Y", sy.data(), y.data() + off, block, 1e-5);
  expect_near(at + "running_mean", srm.data(), wrm.data(), c, 1e-6);
  expect_near(at + "running_var", srv.data(), wrv.data(), c, 1e-6);
  expect_near(at + "saved_mean", sm.data(), mean.data(), c, 1e-6);
  expect_near(at + "saved_invstd", si.data(), invstd.data(), c, 1e-5);
  std::vector<float> sdx(static_cast<size_t>(block)), sds(mean.size()), sdb(mean.size());
  rt::batch_norm_backward_synced(g, n * d, rows, c, d, dy.data() + off, x.data() + off, scale.data(), mean.data(),
                                 invstd.data(), sdx.data(), sds.data(), sdb.data());
  expect_near(at + "dX", sdx.data(), dx.data() + off, block, 1e-5);
  expect_near(at + "dscale", sds.data(), ds.data(), c, 1e-5);
  expect_near(at + "dB", sdb.data(), db.data(), c, 1e-5);
}

void check_losses(const rt::Comm &g, int64_t rows, int64_t classes) {
  int64_t n = rows * g.size();
  std::mt19937 rng(static_cast<unsigned>(n * 7 + classes));
  auto scores = random(rng, n * classes, -3, 3), w = random(rng, classes, 0.2, 2);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t &l : labels) l = std::uniform_int_distribution<int64_t>(0, classes - 1)(rng);
  labels[0] = 1;  // rank 0 holds an ignored label, the other ranks maybe none
  rt::LossShape whole{n, classes, 1, rt::Reduction::mean, true, 1, 0};
  rt::LossShape mine = whole;
  mine.n = rows;
  const int64_t *my_labels = labels.data() + g.index * rows;
  mine.mean_divisor = rt::loss_weight_total_synced(g, mine, my_labels, w.data());
  expect_near("loss_weight_total_synced", std::vector<float>{static_cast<float>(mine.mean_divisor)}.data(),
              std::vector<float>{static_cast<float>(rt::loss_weight_total(whole, labels.data(), w.data()))}.data(), 1,
              1e-6);
  for (bool sce : {true, false}) {
    std::string what = sce ? "softmax_cross_entropy" : "nll";
    float full = 0, part = 0;
    std::vector<float> logp(scores.size()), dfull(scores.size()), dpart(static_cast<size_t>(rows * classes));
    const float *my_scores = scores.data() + g.index * rows * classes;
    float dloss = 1.5f;
    if (sce) {
      rt::softmax_cross_entropy_forward(whole, scores.data(), labels.data(), w.data(), &full, logp.data());
      rt::softmax_cross_entropy_forward(mine, my_scores, my_labels, w.data(), &part, nullptr);
      rt::softmax_cross_entropy_backward(whole, &dloss, logp.data(), labels.data(), w.data(), dfull.data());
      rt::softmax_cross_entropy_backward(mine, &dloss, logp.data() + g.index * rows * classes, my_labels, w.data(),
                                         dpart.data());
    } else {
      rt::nll_forward(whole, scores.data(), labels.data(), w.data(), &full);
      rt::nll_forward(mine, my_scores, my_labels, w.data(), &part);
      rt::nll_backward(whole, &dloss, labels.data(), w.data(), dfull.data());
      rt::nll_backward(mine, &dloss, my_labels, w.data(), dpart.data());
    }
    rt::all_reduce_sum(g, &part, &part, 1);  // what the split kernel does: the shares of the mean add up
    expect_near(what + " loss", &part, &full, 1, 1e-6);
    expect_near(what + " gradient", dpart.data(), dfull.data() + g.index * rows * classes, rows * classes, 1e-6);
  }
}

}  // namespace

int main(int argc, char **argv) {
  const rt::Context &ctx = rt::init(&argc, &argv);
  std::vector<int> world;
  for (int r = 0; r < ctx.world; ++r) world.push_back(r);
  rt::create_groups({world});
  const rt::Comm &g = rt::group(world);
  check_batch_norm(g, 3, 4, 5);
  check_batch_norm(g, 2, 6, 1);
  check_losses(g, 3, 5);
  rt::barrier();
  if (ctx.rank == 0) std::printf("synced norm/loss kernels OK on %d ranks\n", ctx.world);
  rt::finalize();
  return 0;
}
