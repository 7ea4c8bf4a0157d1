// The runtime kernels behind the index and scan kinds against the interpreter: arg_extreme (ArgMax, ArgMin, with
// ties and NaN), top_k (TopKIndices, with ties and NaN), cumsum (CumSum, exclusive and reverse) and one_hot (OneHot, negative and out-of-range indices, float
// and int64 values).
#include <cmath>
#include <limits>

#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

struct Line {
  int64_t outer, len, inner;
};
Line line_of(const Shape &s, size_t axis) {
  Line l{1, s[axis], 1};
  for (size_t d = 0; d < s.size(); ++d)
    if (d < axis) l.outer *= s[d];
    else if (d > axis) l.inner *= s[d];
  return l;
}

/** The largest difference between the runtime's int64 results (positions, one-hot values) and the interpreter's. */
double int64_error(const std::vector<int64_t> &got, const std::vector<double> &want) {
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
  return err;
}

KernelCase arg_case(Shape x, size_t axis, bool min, bool last) {
  return {std::string(min ? "ARGMIN" : "ARGMAX") + "(x=" + dims_str(x) + ",axis=" + std::to_string(axis) +
              (last ? ",last" : "") + ")",
          0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) + axis));
            // Values on a coarse grid, so ties are common; one NaN where there is room.
            std::vector<double> xd = random_data(rng, count(x));
            for (double &v : xd) v = std::round(v * 2) / 2;
            if (xd.size() > 7) xd[7] = std::numeric_limits<double>::quiet_NaN();
            Shape y = x;
            y[axis] = 1;
            OneOp f;
            f.in(x, xd);
            f.out(y, DType::i64);
            auto ref = f.run(min ? OpKind::ArgMin : OpKind::ArgMax,
                             {{"axis", static_cast<int64_t>(axis)}, {"keepdims", int64_t{1}},
                              {"select_last_index", int64_t{last}}});
            Line l = line_of(x, axis);
            auto fx = to_f32(xd);
            std::vector<int64_t> got(static_cast<size_t>(l.outer * l.inner));
            arg_extreme(l.outer, l.len, l.inner, fx.data(), got.data(), min, last);
            return int64_error(got, ref[0]);
          }};
}

TEST(RuntimeKernels, ArgMaxArgMin) {
  std::vector<KernelCase> cases;
  for (bool min : {false, true})
    for (bool last : {false, true}) {
      cases.push_back(arg_case({3, 5, 4}, 1, min, last));
      cases.push_back(arg_case({6, 7}, 1, min, last));
      cases.push_back(arg_case({9}, 0, min, last));
    }
  run_cases(cases);
}

KernelCase top_k_case(Shape x, size_t axis, int64_t k, bool largest) {
  return {"TOPK(x=" + dims_str(x) + ",axis=" + std::to_string(axis) + ",k=" + std::to_string(k) +
              (largest ? "" : ",smallest") + ")",
          0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) * 5 + axis + k));
            // Coarse values, so ties are common (lower position first), and two NaNs (above every number).
            std::vector<double> xd = random_data(rng, count(x));
            for (double &v : xd) v = std::round(v * 2) / 2;
            if (xd.size() > 9) xd[3] = xd[9] = std::numeric_limits<double>::quiet_NaN();
            Shape y = x;
            y[axis] = k;
            OneOp f;
            f.in(x, xd);
            f.out(y, DType::i64);
            auto ref = f.run(OpKind::TopKIndices,
                             {{"axis", static_cast<int64_t>(axis)}, {"k", k}, {"largest", int64_t{largest}}});
            Line l = line_of(x, axis);
            auto fx = to_f32(xd);
            std::vector<int64_t> got(static_cast<size_t>(l.outer * k * l.inner));
            top_k(l.outer, l.len, l.inner, fx.data(), got.data(), k, largest);
            return int64_error(got, ref[0]);
          }};
}

TEST(RuntimeKernels, TopK) {
  std::vector<KernelCase> cases;
  for (bool largest : {true, false}) {
    cases.push_back(top_k_case({3, 5, 4}, 1, 3, largest));
    cases.push_back(top_k_case({6, 7}, 1, 7, largest));
    cases.push_back(top_k_case({4, 6}, 0, 2, largest));
    cases.push_back(top_k_case({11}, 0, 5, largest));
    cases.push_back(top_k_case({2, 500, 3}, 1, 9, largest));  // a long strided line: the CPU's partial sort
  }
  run_cases(cases);
}

KernelCase cumsum_case(Shape x, size_t axis, bool exclusive, bool reverse) {
  return {"CUMSUM(x=" + dims_str(x) + ",axis=" + std::to_string(axis) + (exclusive ? ",exclusive" : "") +
              (reverse ? ",reverse" : "") + ")",
          1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(x) * 3 + axis));
            auto xd = random_data(rng, count(x));
            OneOp f;
            f.in(x, xd);
            f.out(x);
            auto ref = f.run(OpKind::CumSum, {{"axis", static_cast<int64_t>(axis)}, {"exclusive", int64_t{exclusive}},
                                              {"reverse", int64_t{reverse}}});
            Line l = line_of(x, axis);
            auto fx = to_f32(xd);
            std::vector<float> y(fx.size());
            cumsum(l.outer, l.len, l.inner, fx.data(), y.data(), exclusive, reverse);
            return max_error(y, ref[0]);
          }};
}

TEST(RuntimeKernels, CumSum) {
  std::vector<KernelCase> cases;
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      cases.push_back(cumsum_case({2, 6, 3}, 1, exclusive, reverse));
      cases.push_back(cumsum_case({4, 9}, 1, exclusive, reverse));
      cases.push_back(cumsum_case({5, 2}, 0, exclusive, reverse));
    }
  run_cases(cases);
}

KernelCase one_hot_case(Shape ind, size_t axis, int64_t depth, DType values) {
  return {"ONEHOT(indices=" + dims_str(ind) + ",axis=" + std::to_string(axis) + ",depth=" + std::to_string(depth) +
              "," + std::string(dtype_name(values)) + ")",
          0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(ind) + depth));
            // Indices in [-depth - 1, depth]: negative ones count from the end, the two extremes are out of range.
            std::vector<double> id = random_data(rng, count(ind), static_cast<double>(-depth - 1),
                                                 static_cast<double>(depth + 1));
            for (double &v : id) v = std::floor(v);
            std::vector<double> vd = {values == DType::f32 ? -0.5 : 3.0, values == DType::f32 ? 2.25 : 7.0};
            Shape y = ind;
            y.insert(y.begin() + static_cast<std::ptrdiff_t>(axis), depth);
            OneOp f;
            f.in(ind, id, DType::i64);
            f.in({2}, vd, values);
            f.out(y, values);
            auto ref = f.run(OpKind::OneHot, {{"axis", static_cast<int64_t>(axis)}, {"depth", depth}});
            Line l = line_of(y, axis);
            auto fi = to_i64(id);
            double err = 0;
            if (values == DType::f32) {
              auto fv = to_f32(vd);
              std::vector<float> got(static_cast<size_t>(count(y)));
              one_hot(l.outer, l.len, l.inner, fi.data(), fv.data(), got.data(), sizeof(float));
              err = max_error(got, ref[0]);
            } else {
              auto iv = to_i64(vd);
              std::vector<int64_t> got(static_cast<size_t>(count(y)));
              one_hot(l.outer, l.len, l.inner, fi.data(), iv.data(), got.data(), sizeof(int64_t));
              err = int64_error(got, ref[0]);
            }
            return err;
          }};
}

TEST(RuntimeKernels, OneHot) {
  run_cases({one_hot_case({3, 4}, 2, 5, DType::f32), one_hot_case({3, 4}, 0, 6, DType::f32),
             one_hot_case({7}, 1, 3, DType::i64), one_hot_case({2, 3, 2}, 1, 4, DType::i64)});
}

}  // namespace
}  // namespace cleave::rt::testing
