// GEMM and strided batched GEMM on OpenBLAS (row-major cblas).
#include <cblas.h>

#include <algorithm>

#include "cleave/rt.h"

namespace cleave::rt {
namespace {

void check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) fail("gemm: negative size");
  // Row-major: stored A is [m, k] (or [k, m] transposed), so its row stride must cover its columns.
  if (lda < std::max<int64_t>(1, ta ? m : k) || ldb < std::max<int64_t>(1, tb ? k : n) ||
      ldc < std::max<int64_t>(1, n))
    fail("gemm: leading dimension smaller than the row length");
}

// OpenBLAS's GEMM of rt::real (float or double).
[[maybe_unused]] void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, float alpha,
                                const float *a, blasint lda, const float *b, blasint ldb, float beta, float *c,
                                blasint ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
[[maybe_unused]] void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, double alpha,
                                const double *a, blasint lda, const double *b, blasint ldb, double beta, double *c,
                                blasint ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda,
          const real *b, int64_t ldb, real beta, real *c, int64_t ldc, Operands) {
  // Operands: products of bf16 or fp16 values are exact in float32, so the plain fp32 GEMM computes them as well.
  check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (beta == 0.0f)  // BLAS may read C when beta is 0; the contract says its old contents are ignored
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
    return;
  }
  blas_gemm(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
            static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
            static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real *a,
                          int64_t lda, int64_t stride_a, const real *b, int64_t ldb, int64_t stride_b, real beta,
                          real *c, int64_t ldc, int64_t stride_c, int64_t batch, Operands) {
  if (batch < 0) fail("gemm_strided_batched: negative batch");
  for (int64_t i = 0; i < batch; ++i)
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc);
}

}  // namespace cleave::rt
