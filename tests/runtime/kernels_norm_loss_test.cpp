// BatchNormalization, reductions, softmax and the two losses against the reference interpreter.
#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

KernelCase batch_norm_case(Shape x) {
  return {"BATCH_NORM_TRAIN(x=" + dims_str(x) + ",eps=1e-5,momentum=0.9)", 1e-5, [=] {
            int64_t n = x[0], c = x[1], d = count(x) / (x[0] * x[1]);
            std::mt19937 rng(static_cast<unsigned>(count(x)));
            auto xd = random_data(rng, count(x), -2, 3), sc = random_data(rng, c), bi = random_data(rng, c);
            auto rm = random_data(rng, c), rv = random_data(rng, c, 0.5, 2), dyd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            for (auto *v : {&sc, &bi, &rm, &rv}) f.in({c}, *v);
            f.out(x);
            for (int i = 0; i < 4; ++i) f.out({c});
            auto ref = f.run(OpKind::BatchNormalization,
                             {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}});
            auto fx = to_f32(xd), fs = to_f32(sc), fb = to_f32(bi), frm = to_f32(rm), frv = to_f32(rv);
            std::vector<float> fy(fx.size()), mean(static_cast<size_t>(c)), invstd(static_cast<size_t>(c));
            batch_norm_train_forward(n, c, d, fx.data(), fs.data(), fb.data(), 1e-5f, 0.9f, fy.data(), frm.data(),
                                     frv.data(), mean.data(), invstd.data());
            double err = std::max({max_error(fy, ref[0]), max_error(frm, ref[1]), max_error(frv, ref[2]),
                                   max_error(mean, ref[3]), max_error(invstd, ref[4])});
            // Backward from the saved statistics the reference produced.
            OneOp b;
            b.in(x, dyd);
            b.in(x, xd);
            b.in({c}, sc);
            b.in({c}, ref[3]);
            b.in({c}, ref[4]);
            b.out(x);
            b.out({c});
            b.out({c});
            auto rb = b.run(OpKind::BatchNormalizationGrad, {{"epsilon", 1e-5}});
            auto fdy = to_f32(dyd), fm = to_f32(ref[3]), fi = to_f32(ref[4]);
            std::vector<float> dx(fx.size()), ds(static_cast<size_t>(c)), db(static_cast<size_t>(c));
            batch_norm_backward(n, c, d, fdy.data(), fx.data(), fs.data(), fm.data(), fi.data(), dx.data(), ds.data(),
                                db.data());
            return std::max({err, max_error(dx, rb[0]), max_error(ds, rb[1]), max_error(db, rb[2])});
          }};
}

/** The batch of x split in two shards whose partial sums are added (what all_reduce_sum does across ranks) must
 *  reproduce the interpreter's whole-batch BatchNormalization and its gradient. */
KernelCase batch_norm_split_case(Shape x, int64_t first) {
  return {"BATCH_NORM_TRAIN_SPLIT(x=" + dims_str(x) + ",shards=[" + std::to_string(first) + "," +
              std::to_string(x[0] - first) + "])",
          1e-5, [=] {
            int64_t n = x[0], c = x[1], d = count(x) / (x[0] * x[1]);
            std::mt19937 rng(static_cast<unsigned>(count(x) + 5));
            auto xd = random_data(rng, count(x), 3, 5), sc = random_data(rng, c), bi = random_data(rng, c);
            auto rm = random_data(rng, c, 3.5, 4.5), rv = random_data(rng, c, 0.5, 2), dyd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            for (auto *v : {&sc, &bi, &rm, &rv}) f.in({c}, *v);
            f.out(x);
            for (int i = 0; i < 4; ++i) f.out({c});
            auto ref = f.run(OpKind::BatchNormalization,
                             {{"epsilon", 1e-5}, {"momentum", 0.9}, {"training_mode", int64_t{1}}});
            OneOp b;
            b.in(x, dyd);
            b.in(x, xd);
            b.in({c}, sc);
            b.in({c}, ref[3]);
            b.in({c}, ref[4]);
            b.out(x);
            b.out({c});
            b.out({c});
            auto rb = b.run(OpKind::BatchNormalizationGrad, {{"epsilon", 1e-5}});
            auto fx = to_f32(xd), fs = to_f32(sc), fb = to_f32(bi), frm = to_f32(rm), frv = to_f32(rv), fdy = to_f32(dyd);
            const float *shift = frm.data();  // the replicated running mean, before the update
            std::vector<float> stats(static_cast<size_t>(2 * c), 0.0f), part(stats.size());
            int64_t shard_n[2] = {first, n - first}, shard_off[2] = {0, first * c * d};
            for (int s = 0; s < 2; ++s) {
              batch_norm_partial_stats(shard_n[s], c, d, fx.data() + shard_off[s], shift, part.data());
              for (size_t i = 0; i < stats.size(); ++i) stats[i] += part[i];
            }
            std::vector<float> y(fx.size()), mean(static_cast<size_t>(c)), invstd(static_cast<size_t>(c));
            std::vector<float> nrm = frm, nrv = frv;  // each rank updates its replicated running stats the same way
            for (int s = 0; s < 2; ++s) {
              std::vector<float> rm_s = frm, rv_s = frv;
              batch_norm_train_forward_from_stats(shard_n[s], c, d, fx.data() + shard_off[s], fs.data(), fb.data(),
                                                  stats.data(), shift, n * d, 1e-5f, 0.9f, y.data() + shard_off[s],
                                                  rm_s.data(), rv_s.data(), mean.data(), invstd.data());
              nrm = rm_s;
              nrv = rv_s;
            }
            double err = std::max({max_error(y, ref[0]), max_error(nrm, ref[1]), max_error(nrv, ref[2]),
                                   max_error(mean, ref[3]), max_error(invstd, ref[4])});
            std::vector<float> sums(static_cast<size_t>(2 * c), 0.0f), dx(fx.size());
            for (int s = 0; s < 2; ++s) {
              batch_norm_backward_partial_sums(shard_n[s], c, d, fdy.data() + shard_off[s], fx.data() + shard_off[s],
                                               mean.data(), invstd.data(), part.data());
              for (size_t i = 0; i < sums.size(); ++i) sums[i] += part[i];
            }
            for (int s = 0; s < 2; ++s)
              batch_norm_backward_data_from_sums(shard_n[s], c, d, fdy.data() + shard_off[s], fx.data() + shard_off[s],
                                                 fs.data(), mean.data(), invstd.data(), sums.data(), n * d,
                                                 dx.data() + shard_off[s]);
            std::vector<float> ds(sums.begin() + c, sums.end()), db(sums.begin(), sums.begin() + c);
            return std::max({err, max_error(dx, rb[0]), max_error(ds, rb[1]), max_error(db, rb[2])});
          }};
}

KernelCase reduce_case(Shape x, Dims axes, bool mean) {
  return {std::string(mean ? "REDUCE_MEAN" : "REDUCE_SUM") + "(x=" + dims_str(x) + ",axes=" + dims_str(axes) + ")",
          1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + axes.size()));
            auto xd = random_data(rng, count(x));
            Shape y;
            for (size_t d = 0; d < x.size(); ++d)
              if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end()) y.push_back(x[d]);
            OneOp f;
            f.in(x, xd);
            f.out(y);
            auto ref = f.run(mean ? OpKind::ReduceMean : OpKind::ReduceSum, {{"axes", axes}, {"keepdims", int64_t{0}}});
            auto fx = to_f32(xd);
            std::vector<float> fy(static_cast<size_t>(count(y)));
            reduce(x, axes, fx.data(), fy.data(), mean);
            return max_error(fy, ref[0]);
          }};
}

KernelCase softmax_case(Shape x, int64_t axis, bool log) {
  return {std::string(log ? "LOG_SOFTMAX" : "SOFTMAX") + "(x=" + dims_str(x) + ",axis=" + std::to_string(axis) + ")",
          1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) * 3 + axis));
            auto xd = random_data(rng, count(x), -5, 5), dyd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            f.out(x);
            auto ref = f.run(log ? OpKind::LogSoftmax : OpKind::Softmax, {{"axis", axis}});
            int64_t outer = 1, inner = 1;
            for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
              if (d < axis) outer *= x[static_cast<size_t>(d)];
              if (d > axis) inner *= x[static_cast<size_t>(d)];
            }
            int64_t dim = x[static_cast<size_t>(axis)];
            auto fx = to_f32(xd), fdy = to_f32(dyd);
            std::vector<float> fy(fx.size()), fdx(fx.size());
            softmax_forward(outer, dim, inner, fx.data(), fy.data(), log);
            OneOp b;
            b.in(x, dyd);
            b.in(x, ref[0]);
            b.out(x);
            auto rb = b.run(log ? OpKind::LogSoftmaxGrad : OpKind::SoftmaxGrad, {{"axis", axis}});
            auto fyr = to_f32(ref[0]);
            softmax_backward(outer, dim, inner, fdy.data(), fyr.data(), fdx.data(), log);
            return std::max(max_error(fy, ref[0]), max_error(fdx, rb[0]));
          }};
}

/** SCE or NLL over scores [n, c, d...] with the given reduction, optional weights and ignore_index. */
KernelCase loss_case(bool sce, Shape x, const std::string &reduction, bool weights, bool ignore) {
  std::string name = std::string(sce ? "SOFTMAX_CROSS_ENTROPY" : "NLL") + "(x=" + dims_str(x) +
                     ",reduction=" + reduction + ",weights=" + std::to_string(weights) +
                     ",ignore_index=" + (ignore ? "1" : "none") + ")";
  return {name, 1e-5, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) * 7 + reduction.size() + weights * 2 + ignore));
            Shape lab = x;
            lab.erase(lab.begin() + 1);
            LossShape s{x[0], x[1], count(x) / (x[0] * x[1]), Reduction::mean, ignore, 1, 0};
            s.reduction = reduction == "none" ? Reduction::none : reduction == "sum" ? Reduction::sum : Reduction::mean;
            std::vector<double> labels(static_cast<size_t>(count(lab)));
            for (double &l : labels) l = static_cast<double>(std::uniform_int_distribution<int64_t>(0, x[1] - 1)(rng));
            labels[0] = 1;  // at least one position carries the ignore_index (and one label 1 without it)
            auto xd = random_data(rng, count(x), -3, 3), wd = random_data(rng, x[1], 0.2, 2);
            Shape loss_shape = reduction == "none" ? lab : Shape{};
            auto dld = random_data(rng, count(loss_shape));
            AttrMap attrs{{"reduction", reduction}};
            if (ignore) attrs["ignore_index"] = int64_t{1};
            OneOp f;
            f.in(x, xd);
            f.in(lab, labels, DType::i64);
            if (weights) f.in({x[1]}, wd);
            f.out(loss_shape);
            if (sce) f.out(x);
            auto ref = f.run(sce ? OpKind::SoftmaxCrossEntropyLoss : OpKind::NegativeLogLikelihoodLoss, attrs);
            auto fx = to_f32(xd), fw = to_f32(wd), fdl = to_f32(dld);
            auto il = to_i64(labels);
            const float *w = weights ? fw.data() : nullptr;
            std::vector<float> loss(static_cast<size_t>(count(loss_shape))), logp(fx.size()), dx(fx.size(), NAN);
            if (sce) softmax_cross_entropy_forward(s, fx.data(), il.data(), w, loss.data(), logp.data());
            else nll_forward(s, fx.data(), il.data(), w, loss.data());
            double err = max_error(loss, ref[0]);
            if (sce) err = std::max(err, max_error(logp, ref[1]));
            OneOp b;
            b.in(loss_shape, dld);
            b.in(x, sce ? ref[1] : xd);
            b.in(lab, labels, DType::i64);
            if (weights) b.in({x[1]}, wd);
            b.out(x);
            auto rb = b.run(sce ? OpKind::SoftmaxCrossEntropyLossGrad : OpKind::NegativeLogLikelihoodLossGrad, attrs);
            if (sce) {
              auto flp = to_f32(ref[1]);
              softmax_cross_entropy_backward(s, fdl.data(), flp.data(), il.data(), w, dx.data());
            } else {
              nll_backward(s, fdl.data(), il.data(), w, dx.data());
            }
            return std::max(err, max_error(dx, rb[0]));
          }};
}

TEST(RuntimeKernels, BatchNormAndReduce) {
  std::vector<KernelCase> cases = {batch_norm_case({4, 3, 5, 5}), batch_norm_case({8, 6}),
                                   batch_norm_case({2, 2, 3, 4, 2}), batch_norm_split_case({5, 3, 4, 4}, 2),
                                   batch_norm_split_case({6, 4}, 3)};
  cases.push_back(reduce_case({3, 4, 5}, {0, 2}, false));
  cases.push_back(reduce_case({3, 4, 5}, {1}, true));
  cases.push_back(reduce_case({2, 3, 4, 5}, {0, 1, 2, 3}, true));
  cases.push_back(reduce_case({6, 7}, {0}, false));
  run_cases(cases);
}

TEST(RuntimeKernels, SoftmaxAndLosses) {
  std::vector<KernelCase> cases;
  for (bool log : {false, true}) {
    cases.push_back(softmax_case({4, 10}, 1, log));
    cases.push_back(softmax_case({2, 5, 3, 4}, 1, log));
    cases.push_back(softmax_case({3, 4, 6}, 0, log));
  }
  for (bool sce : {true, false})
    for (const char *red : {"none", "sum", "mean"})
      for (bool w : {false, true})
        for (bool ign : {false, true}) cases.push_back(loss_case(sce, sce ? Shape{6, 5} : Shape{3, 4, 2, 3}, red, w, ign));
  run_cases(cases);
}

TEST(RuntimeKernels, LossMeanDivisorSplitsLikeTheWholeBatch) {
  // Mean over a batch split in two halves, each dividing by the global weight total, sums to the whole batch's mean.
  std::mt19937 rng(99);
  auto x = to_f32(random_data(rng, 8 * 5, -2, 2));
  std::vector<int64_t> labels = {0, 4, 2, 1, 1, 3, 0, 2};
  std::vector<float> w = {0.5f, 1.0f, 2.0f, 1.5f, 0.25f};
  LossShape whole{8, 5, 1, Reduction::mean, true, 1, 0};
  float full = 0, a = 0, b = 0;
  softmax_cross_entropy_forward(whole, x.data(), labels.data(), w.data(), &full, nullptr);
  LossShape half = whole;
  half.n = 4;
  half.mean_divisor = loss_weight_total(whole, labels.data(), w.data());
  softmax_cross_entropy_forward(half, x.data(), labels.data(), w.data(), &a, nullptr);
  softmax_cross_entropy_forward(half, x.data() + 20, labels.data() + 4, w.data(), &b, nullptr);
  EXPECT_NEAR(a + b, full, 1e-6 * std::fabs(full));
}

}  // namespace
}  // namespace cleave::rt::testing
