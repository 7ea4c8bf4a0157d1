// Gemm and MatMul.
#include <algorithm>

#include "ir/interp/kernels.h"

namespace cleave::interp {

void kernel_Gemm(const KernelArgs &k) {
  // Y = alpha * op(A) @ op(B) + beta * C, C broadcast unidirectionally to [M, N].
  // Under transA alone A [r..., m] and B [r..., n] may sum several leading dims r: as [R, m] and [R, n].
  const Value &a = k.in(0);
  const Value &b = k.in(1);
  bool ta = k.op.attr_int("transA", 0) != 0;
  bool tb = k.op.attr_int("transB", 0) != 0;
  bool rows = ta && !tb && !k.has_in(2) && a.shape.size() > 2;
  if (rows && (b.shape.size() != a.shape.size() || !std::equal(a.shape.begin(), a.shape.end() - 1, b.shape.begin())))
    CLEAVE_USER_ERROR(k.label(), ": A ", shape_str(a.shape), " and B ", shape_str(b.shape),
                      " differ in their leading dims");
  if (!rows && (a.shape.size() != 2 || b.shape.size() != 2))
    CLEAVE_USER_ERROR(k.label(), ": A and B must be 2-D, got ", shape_str(a.shape), " and ", shape_str(b.shape));
  const int64_t acols = a.shape.back(), bcols = b.shape.back();
  double alpha = k.op.attr_float("alpha", 1.0);
  double beta = k.op.attr_float("beta", 1.0);
  int64_t m = ta ? acols : a.shape[0];
  auto rows_of = [](const Shape &s) { return num_elements(Shape(s.begin(), s.end() - 1)); };
  int64_t kk = ta ? rows_of(a.shape) : acols;
  int64_t kb = tb ? bcols : rows_of(b.shape);
  int64_t n = tb ? b.shape[0] : bcols;
  if (kk != kb) CLEAVE_USER_ERROR(k.label(), ": inner dimensions ", kk, " and ", kb, " differ");
  Shape shape{m, n};
  k.expect_out_shape(0, shape);
  std::vector<int64_t> ic;
  if (k.has_in(2)) {
    if (broadcast_shape(k, k.in(2).shape, shape) != shape)
      CLEAVE_USER_ERROR(k.label(), ": C of shape ", shape_str(k.in(2).shape), " does not broadcast to ",
                        shape_str(shape));
    ic = broadcast_index_map(k.in(2).shape, shape);
  }
  Value &y = k.out(0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < kk; ++p) {
        double av = ta ? a.data[p * acols + i] : a.data[i * acols + p];
        double bv = tb ? b.data[j * bcols + p] : b.data[p * bcols + j];
        acc += av * bv;
      }
      double v = alpha * acc;
      if (k.has_in(2)) v += beta * k.in(2).data[ic[i * n + j]];
      y.data[i * n + j] = v;
    }
  }
}

void kernel_MatMul(const KernelArgs &k) {
  // numpy.matmul: a 1-D A is [1, K] and a 1-D B is [K, 1], the added dim removed from the result; leading
  // (batch) dims broadcast. transA / transB read that operand with its last two dims swapped.
  const Value &a = k.in(0);
  const Value &b = k.in(1);
  if (a.shape.empty() || b.shape.empty()) CLEAVE_USER_ERROR(k.label(), ": operands must have rank >= 1");
  bool ta = k.op.attr_int("transA", 0) != 0, tb = k.op.attr_int("transB", 0) != 0;
  if (ta && a.shape.size() < 2) CLEAVE_USER_ERROR(k.label(), ": transA needs A of rank >= 2, got ", shape_str(a.shape));
  if (tb && b.shape.size() < 2) CLEAVE_USER_ERROR(k.label(), ": transB needs B of rank >= 2, got ", shape_str(b.shape));
  Shape as = a.shape, bs = b.shape;
  if (ta) std::swap(as[as.size() - 2], as.back());
  if (tb) std::swap(bs[bs.size() - 2], bs.back());
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t m = as[as.size() - 2], kk = as.back();
  int64_t kb = bs[bs.size() - 2], n = bs.back();
  if (kk != kb) CLEAVE_USER_ERROR(k.label(), ": inner dimensions ", kk, " and ", kb, " differ");
  Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  Shape batch = broadcast_shape(k, a_batch, b_batch);
  Shape shape = batch;
  if (a.shape.size() > 1) shape.push_back(m);
  if (b.shape.size() > 1) shape.push_back(n);
  k.expect_out_shape(0, shape);
  std::vector<int64_t> ia = broadcast_index_map(a_batch, batch);
  std::vector<int64_t> ib = broadcast_index_map(b_batch, batch);
  Value &y = k.out(0);
  int64_t nb = num_elements(batch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const double *pa = a.data.data() + ia[bi] * m * kk;
    const double *pb = b.data.data() + ib[bi] * kk * n;
    double *py = y.data.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < kk; ++p) acc += pa[ta ? p * m + i : i * kk + p] * pb[tb ? j * kk + p : p * n + j];
        py[i * n + j] = acc;
      }
  }
}

}  // namespace cleave::interp
