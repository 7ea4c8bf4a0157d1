// GEMM and strided batched GEMM on cuBLAS (cublasGemmEx, fp32 accumulation; no TF32 unless --precision tf32, bf16 or
// fp16 tensor cores for operands that hold only such values: rt::Operands). cuBLAS is column-major: a row-major
// C [m, n] is the column-major C^T [n, m], and C^T = op(B)^T op(A)^T, so each call swaps the operands and m/n.
#include <climits>

#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

void check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) fail("gemm: negative size");
  if (lda < std::max<int64_t>(1, ta ? m : k) || ldb < std::max<int64_t>(1, tb ? k : n) ||
      ldc < std::max<int64_t>(1, n))
    fail("gemm: leading dimension smaller than the row length");
  for (int64_t v : {m, n, k, lda, ldb, ldc})
    if (v > INT_MAX) fail("gemm: size " + std::to_string(v) + " exceeds cuBLAS's int range");
}

/** C = beta * C over m rows of n (beta 0 writes zeros, ignoring NaN): a GEMM with k == 0. */
__global__ void scale_rows(int64_t m, int64_t n, float beta, float *c, int64_t ldc, int64_t stride_c, int64_t batch) {
  int64_t total = batch * m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    int64_t b = i / (m * n), r = i / n % m, j = i % n;
    float *p = c + b * stride_c + r * ldc + j;
    *p = beta == 0.0f ? 0.0f : beta * *p;
  }
}

cublasOperation_t op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

/** cuBLAS's compute type for a GEMM on `operands`, always accumulating in float32: the handle's (fp32, or TF32 under
 *  --precision tf32), or on bf16/fp16 operands of a mixed-precision program their tensor cores (converting the
 *  float32 storage to them is exact), TF32's under CLEAVE_LOW_MATH=tf32 (exact too). */
cublasComputeType_t compute_type(Operands operands) {
  if (operands == Operands::f32 || math() != Math::mixed || !detail::tensor_math(operands)) return CUBLAS_COMPUTE_32F;
  if (detail::low_math() == detail::LowMath::tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return operands == Operands::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_16F;
}

/** The handle's math mode for one call: a mixed-precision program's handle is pedantic (its f32 GEMMs stay fp32
 *  exactly); a call with a reduced-precision compute type runs under the default mode, which lets cuBLAS use it. */
class CallMath {
 public:
  explicit CallMath(cublasComputeType_t t) : switched_(t != CUBLAS_COMPUTE_32F) {
    if (switched_) CLEAVE_CUBLAS(cublasSetMathMode, detail::cublas(), CUBLAS_DEFAULT_MATH);
  }
  ~CallMath() {
    if (switched_) CLEAVE_CUBLAS(cublasSetMathMode, detail::cublas(), CUBLAS_PEDANTIC_MATH);
  }
  CallMath(const CallMath &) = delete;
  CallMath &operator=(const CallMath &) = delete;

 private:
  bool switched_;
};

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
          const float *b, int64_t ldb, float beta, float *c, int64_t ldc, Operands operands) {
  gemm_strided_batched(trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1, operands);
}

void gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b, float beta,
                          float *c, int64_t ldc, int64_t stride_c, int64_t batch, Operands operands) {
  if (batch < 0) fail("gemm_strided_batched: negative batch");
  if (batch > INT_MAX) fail("gemm_strided_batched: batch exceeds cuBLAS's int range");
  check_gemm(trans_a, trans_b, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {
    CLEAVE_LAUNCH(scale_rows, detail::grid_for(batch * m * n), detail::kThreads, m, n, beta, c, ldc, stride_c, batch);
    return;
  }
  cublasComputeType_t compute = compute_type(operands);
  CallMath call_math(compute);
  if (batch == 1) {
    CLEAVE_CUBLAS(cublasGemmEx, detail::cublas(), op(trans_b), op(trans_a), static_cast<int>(n), static_cast<int>(m),
                  static_cast<int>(k), &alpha, b, CUDA_R_32F, static_cast<int>(ldb), a, CUDA_R_32F,
                  static_cast<int>(lda), &beta, c, CUDA_R_32F, static_cast<int>(ldc), compute,
                  CUBLAS_GEMM_DEFAULT);
    return;
  }
  CLEAVE_CUBLAS(cublasGemmStridedBatchedEx, detail::cublas(), op(trans_b), op(trans_a), static_cast<int>(n),
                static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F, static_cast<int>(ldb),
                static_cast<long long>(stride_b), a, CUDA_R_32F, static_cast<int>(lda),
                static_cast<long long>(stride_a), &beta, c, CUDA_R_32F, static_cast<int>(ldc),
                static_cast<long long>(stride_c), static_cast<int>(batch), compute,
                CUBLAS_GEMM_DEFAULT);
}

}  // namespace cleave::rt
