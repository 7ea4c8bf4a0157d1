// The runtime kernels behind GatherElements, ScatterElements (none and add, repeated targets), GatherND (batch_dims 0
// and > 0) and GatherNDGrad against the interpreter, with negative indices; and the out-of-range index each one
// refuses (rt::fail).
#include <cmath>

#include "tests/runtime/one_op.h"

namespace cleave::rt::testing {
namespace {

/** n indices in [-dim, dim) (negative ones count from the end), as exact doubles. */
std::vector<double> random_indices(std::mt19937 &rng, int64_t n, int64_t dim) {
  std::uniform_int_distribution<int64_t> u(-dim, dim - 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (double &x : v) x = static_cast<double>(u(rng));
  return v;
}

std::string axis_str(int64_t axis) { return ",axis=" + std::to_string(axis); }

KernelCase gather_elements_case(Shape data, Shape ind, int64_t axis) {
  return {"GATHER_ELEMENTS(data=" + dims_str(data) + ",indices=" + dims_str(ind) + axis_str(axis) + ")", 0, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(data) + count(ind) + axis));
            auto dd = random_data(rng, count(data));
            auto id = random_indices(rng, count(ind), data[static_cast<size_t>(axis)]);
            OneOp f;
            f.in(data, dd);
            f.in(ind, id, DType::i64);
            f.out(ind);
            auto ref = f.run(OpKind::GatherElements, {{"axis", axis}});
            auto fd = to_f32(dd);
            auto fi = to_i64(id);
            std::vector<float> y(static_cast<size_t>(count(ind)));
            gather_elements(data, ind, axis, fi.data(), fd.data(), y.data());
            return max_error(y, ref[0]);
          }};
}

/** Without a reduction each line along the axis gets distinct targets (a shuffled prefix of the axis, some written
 *  negative), as ONNX requires; with add they repeat freely. */
KernelCase scatter_elements_case(Shape data, Shape ind, int64_t axis, bool add) {
  return {"SCATTER_ELEMENTS(data=" + dims_str(data) + ",indices=" + dims_str(ind) + axis_str(axis) +
              (add ? ",add" : ",none") + ")",
          1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(data) * 7 + count(ind) + axis + add));
            auto a = static_cast<size_t>(axis);
            int64_t dim = data[a];
            auto dd = random_data(rng, count(data));
            auto ud = random_data(rng, count(ind));
            std::vector<double> id = random_indices(rng, count(ind), dim);
            if (!add) {
              int64_t outer = 1, inner = 1;
              for (size_t d = 0; d < ind.size(); ++d)
                if (d < a) outer *= ind[d];
                else if (d > a) inner *= ind[d];
              for (int64_t o = 0; o < outer; ++o)
                for (int64_t i = 0; i < inner; ++i) {
                  std::vector<int64_t> perm(static_cast<size_t>(dim));
                  for (int64_t j = 0; j < dim; ++j) perm[static_cast<size_t>(j)] = j;
                  std::shuffle(perm.begin(), perm.end(), rng);
                  for (int64_t j = 0; j < ind[a]; ++j) {
                    int64_t t = perm[static_cast<size_t>(j)];
                    id[static_cast<size_t>((o * ind[a] + j) * inner + i)] =
                        static_cast<double>(t % 2 != 0 ? t - dim : t);
                  }
                }
            }
            OneOp f;
            f.in(data, dd);
            f.in(ind, id, DType::i64);
            f.in(ind, ud);
            f.out(data);
            auto ref = f.run(OpKind::ScatterElements,
                             {{"axis", axis}, {"reduction", std::string(add ? "add" : "none")}});
            auto fd = to_f32(dd), fu = to_f32(ud);
            auto fi = to_i64(id);
            std::vector<float> y(fd.size());
            scatter_elements(data, ind, axis, fi.data(), fd.data(), fu.data(), y.data(), add);
            return max_error(y, ref[0]);
          }};
}

Shape gather_nd_shape(const Shape &data, const Shape &ind, int64_t b) {
  Shape y(ind.begin(), ind.end() - 1);
  y.insert(y.end(), data.begin() + b + ind.back(), data.end());
  return y;
}

KernelCase gather_nd_case(Shape data, Shape ind, int64_t b, bool backward) {
  return {std::string(backward ? "GATHER_ND_BACKWARD" : "GATHER_ND") + "(data=" + dims_str(data) +
              ",indices=" + dims_str(ind) + ",batch_dims=" + std::to_string(b) + ")",
          1e-6, [=] {
            std::mt19937 rng(static_cast<unsigned>(count(data) * 3 + count(ind) + b + backward));
            Shape y = gather_nd_shape(data, ind, b);
            // Index tuple coordinates, each in range of the data dim it addresses.
            std::vector<double> id(static_cast<size_t>(count(ind)));
            int64_t k = ind.back();
            for (size_t e = 0; e < id.size(); ++e) {
              int64_t dim = data[static_cast<size_t>(b) + e % static_cast<size_t>(k)];
              id[e] = random_indices(rng, 1, dim)[0];
            }
            auto fi = to_i64(id);
            OneOp f;
            if (!backward) {
              auto dd = random_data(rng, count(data));
              f.in(data, dd);
              f.in(ind, id, DType::i64);
              f.out(y);
              auto ref = f.run(OpKind::GatherND, {{"batch_dims", b}});
              auto fd = to_f32(dd);
              std::vector<float> got(static_cast<size_t>(count(y)));
              gather_nd(data, ind, b, fi.data(), fd.data(), got.data());
              return max_error(got, ref[0]);
            }
            auto dyd = random_data(rng, count(y));
            f.in(y, dyd);
            f.in(ind, id, DType::i64);
            f.out(data);
            auto ref = f.run(OpKind::GatherNDGrad, {{"batch_dims", b}});
            auto fdy = to_f32(dyd);
            std::vector<float> got(static_cast<size_t>(count(data)), 7.0f);  // the kernel zeroes it first
            gather_nd_backward(data, ind, b, fi.data(), fdy.data(), got.data());
            return max_error(got, ref[0]);
          }};
}

TEST(RuntimeKernels, GatherElements) {
  run_cases({gather_elements_case({4, 6}, {4, 6}, 1), gather_elements_case({4, 6}, {3, 5}, 0),
             gather_elements_case({3, 5, 4}, {2, 7, 3}, 1), gather_elements_case({9}, {12}, 0)});
}

TEST(RuntimeKernels, ScatterElements) {
  std::vector<KernelCase> cases;
  for (bool add : {false, true}) {
    cases.push_back(scatter_elements_case({4, 6}, {4, 3}, 1, add));
    cases.push_back(scatter_elements_case({5, 3}, {2, 2}, 0, add));
    cases.push_back(scatter_elements_case({3, 5, 4}, {2, 4, 3}, 1, add));
  }
  cases.push_back(scatter_elements_case({3, 4}, {3, 9}, 1, true));  // more updates than targets: sums
  run_cases(cases);
}

TEST(RuntimeKernels, GatherND) {
  std::vector<KernelCase> cases;
  for (bool backward : {false, true}) {
    cases.push_back(gather_nd_case({5, 4, 3}, {6, 2}, 0, backward));
    cases.push_back(gather_nd_case({5, 4, 3}, {2, 3, 3}, 0, backward));
    cases.push_back(gather_nd_case({5, 4}, {7, 1}, 0, backward));
    cases.push_back(gather_nd_case({2, 5, 4}, {2, 3, 1}, 1, backward));
    cases.push_back(gather_nd_case({2, 3, 5, 4}, {2, 3, 2}, 2, backward));
    cases.push_back(gather_nd_case({2, 6, 4}, {2, 2}, 1, backward));  // one tuple per batch
  }
  run_cases(cases);
}

TEST(RuntimeKernelsDeathTest, GatherScatterIndexOutOfRange) {
  // rt::fail ends the job with one line naming the kernel and the index, as rt::gather does.
  std::vector<float> data(12, 1.0f), y(12);
  std::vector<int64_t> bad = {0, 1, 3, -1, 0, 2}, low = {0, 1, 2, -4, 0, 2};  // dim 3: 3 and -4 are out of range
  EXPECT_DEATH(gather_elements({4, 3}, {2, 3}, 1, bad.data(), data.data(), y.data()),
               "gather_elements: index 3 is out of range \\[-3, 3\\)");
  EXPECT_DEATH(scatter_elements({4, 3}, {2, 3}, 1, low.data(), data.data(), data.data(), y.data(), true),
               "scatter_elements: index -4 is out of range \\[-3, 3\\)");
  EXPECT_DEATH(gather_nd({3, 4}, {6, 1}, 0, bad.data(), data.data(), y.data()),
               "gather_nd: index 3 is out of range \\[-3, 3\\)");
}

}  // namespace
}  // namespace cleave::rt::testing
