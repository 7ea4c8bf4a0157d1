#pragma once
// The Cleave runtime API (DESIGN §7): the only interface generated per-rank programs call. It includes nothing of the
// compiler's, so a bundle builds with only MPI, BLAS and its copy of runtime/.
//
// Conventions for every function below:
//  - Floating tensors are `real` (float32; float64 in a runtime built with CLEAVE_RT_F64), labels/indices
//    int64, dense and row-major, passed as raw pointers with explicit shapes.
//  - Output buffers are written, never accumulated into, unless the function says so; they must not alias inputs
//    unless the function says so.
//  - Sizes are int64_t element counts. A precondition violated by the caller is a bug in generated code: the runtime
//    reports it through fail(), which aborts the whole MPI job with a message naming the rank.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cleave/rng.h"  // defines CLEAVE_HD: __host__ __device__ under nvcc, empty otherwise
#include "cleave/schedule.h"
#include "cleave/validation.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace cleave {

namespace detail {
/** A float's bits and back, on the host and in device code. */
CLEAVE_HD inline uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
#endif
}
CLEAVE_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  __builtin_memcpy(&x, &u, sizeof u);
  return x;
#endif
}
}  // namespace detail

/** x rounded to the nearest bfloat16 (ties to even) and kept as float, as torch's float -> bfloat16 cast; NaN stays
 *  NaN. Generated code calls it for the RoundToBf16 op (--precision bf16). */
CLEAVE_HD inline float round_bf16(float x) {
  uint32_t u = detail::float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  return detail::bits_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

/** x rounded to the nearest IEEE binary16 value (ties to even; |x| >= 65520 becomes inf, below 2^-14 the subnormal
 *  step 2^-24) and kept as float, as torch's float -> half cast; NaN stays NaN. Generated code calls it for the
 *  RoundToFp16 op (--precision fp16). */
CLEAVE_HD inline float round_fp16(float x) {
  uint32_t u = detail::float_bits(x), a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a > 0x7f800000u) return x;
  if (a >= 0x477ff000u) return detail::bits_float(sign | 0x7f800000u);  // 65520: halfway to 2^16, to even: inf
  if (a >= 0x38800000u)  // normal: 10 of the 23 fraction bits, to nearest even
    return detail::bits_float(sign | ((a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu));
  // Subnormal in binary16: a multiple of 2^-24 (the scalings by 2^24 are exact).
#if defined(__CUDA_ARCH__)
  float r = rintf(detail::bits_float(a) * 16777216.0f) * 5.9604644775390625e-8f;
#else
  float r = __builtin_rintf(detail::bits_float(a) * 16777216.0f) * 5.9604644775390625e-8f;
#endif
  return sign ? -r : r;
}

}  // namespace cleave

namespace cleave::rt {

/** The floating type of every tensor the runtime computes on: float, or double in a runtime built with CLEAVE_RT_F64
 *  (cpu backend only; a float64 model's bundle: codegen/emit_bundle.cpp). Generated code and the runtime must agree (the
 *  definition is public on the runtime target); a mismatch fails to link, as every signature names the type. */
#if defined(CLEAVE_RT_F64)
#if defined(__CUDACC__)
#error "CLEAVE_RT_F64: the cuda backend computes in float32 only"
#endif
using real = double;
#else
using real = float;
#endif

using Dims = std::vector<int64_t>;

// ---------------------------------------------------------------- context, errors, logging (context.cpp)

struct Context {
  int rank = 0;           // MPI_COMM_WORLD rank
  int world = 1;          // MPI_COMM_WORLD size
  std::string launcher;   // where the launch environment came from: "ompi", "slurm", "env" or "none" (logging only)
  int launcher_rank = -1; // the rank the launcher's variables claim (OMPI_COMM_WORLD_RANK, SLURM_PROCID, RANK)
  int launcher_world = -1;  // likewise the size (OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, WORLD_SIZE)
};

/** Calls MPI_Init (once), makes MPI errors return codes (so CLEAVE_MPI can report them) and reads the launcher's
 *  variables, fail()ing when they disagree with MPI's rank or size. Returns the process-wide context. */
const Context &init(int *argc, char ***argv);
/** The arithmetic of GEMMs and convolutions (cleave compile --precision): fp32 exactly; TF32 tensor cores where the
 *  backend has them (CUDA: cuBLAS and cuDNN on Ampere and later); or `mixed` (--precision bf16 and fp16): bf16 or
 *  fp16 tensor cores for the calls whose operands hold only such values (rt::Operands), fp32 exactly for the others.
 *  The cpu backend computes fp32 either way. Generated code calls set_math before init(). */
enum class Math { fp32, tf32, mixed };
void set_math(Math m);
Math math();
/** The context; fail()s if init() was not called. */
const Context &context();
/** Frees cached communicators and calls MPI_Finalize. */
void finalize();

/** Prints `cleave rank R: <msg>` to stderr and aborts the whole job (MPI_Abort, exit code 1). Usable before init. */
[[noreturn]] void fail(const std::string &msg);
/** The check behind CLEAVE_MPI: on a code other than MPI_SUCCESS prints
 *  `cleave rank R: MPI_Xxx failed at file:line: <MPI error string>` and aborts the job. */
void check_mpi(int code, const char *call, const char *file, int line);
#define CLEAVE_MPI(fn, ...) ::cleave::rt::check_mpi(fn(__VA_ARGS__), #fn, __FILE__, __LINE__)

/** On rank 0 only: prints `step <k> loss <value>` (value with %.9g, as `cleave eval`) to stdout and flushes. `loss`
 *  points at the backend's buffer holding the scalar (device memory under CUDA), so generated code never dereferences
 *  a buffer itself. */
void log_loss(int64_t step, const real *loss);
/** On rank 0 only: prints `cleave: <msg>` to stderr. */
void log_info(const std::string &msg);

// ---------------------------------------------------------------- profiling (common/profile.cpp)
// With CLEAVE_PROFILE=PREFIX in the environment a rank program times itself: every timed statement of its step (a
// kernel, the communication before an op, a copy, a data read) and every step. At profile_finish() each rank writes
// PREFIX.rank_<r>.json ({"rank", "steps": [seconds per step], "sites": [{"kind", "ops", "shard", ["bytes",]
// "seconds": [per step]}]}; bytes on copy and data sites) and rank 0 logs (stderr) the median step time over the
// steps after the first (a warm-up). Statement
// times are wall clock on the cpu backend and CUDA events on the compute stream under cuda; step times are wall
// clock (under cuda after a device synchronize). Without the variable each call below costs one untaken branch.

/** A timed statement of the generated step: a kernel, a collective or send/recv (comm), a region copy packing or
 *  unpacking communicated boxes or applying an update (copy), or a read of a data shard (data). */
struct ProfileSite {
  enum Kind { kernel, comm, copy, data } kind = kernel;
  /** kernel: the key of this rank's share of its first op (the planner's shard_key); otherwise "". */
  const char *shard = "";
  /** Its ops, as a range of profile_setup's `ops`: a kernel's (several when fused), or the op a comm or copy runs
   *  before (none: the end of the step; none for data). */
  int first_op = 0, num_ops = 0;
  /** copy: the bytes copied; data: the bytes read; otherwise 0. */
  long long bytes = 0;
};
namespace detail {
extern bool g_profiling;
void profile_mark(int site, bool end);
void profile_step(bool end);
/** Set with CLEAVE_STATUS_DIR (common/run_status.h): each step is counted in the rank's status record, so that a
 *  stall names the step a stopped rank was in. */
extern bool g_run_status;
void run_status_step();
}  // namespace detail
/** Reads CLEAVE_PROFILE and registers the program's sites (`sites` and `ops` must outlive the run: static arrays).
 *  Call once, after init(). */
void profile_setup(const ProfileSite *sites, int count, const char *const *ops);
inline bool profiling() { return detail::g_profiling; }
inline void profile_begin(int site) {
  if (detail::g_profiling) detail::profile_mark(site, false);
}
inline void profile_end(int site) {
  if (detail::g_profiling) detail::profile_mark(site, true);
}
/** Begins a step: also counts it for the run status (an untaken branch without CLEAVE_STATUS_DIR). */
inline void profile_step_begin() {
  if (detail::g_run_status) detail::run_status_step();
  if (detail::g_profiling) detail::profile_step(false);
}
inline void profile_step_end() {
  if (detail::g_profiling) detail::profile_step(true);
}
/** Writes this rank's JSON file and logs the median step time (rank 0); does nothing without CLEAVE_PROFILE. */
void profile_finish();

// ---------------------------------------------------------------- arena (context.cpp)

/** One aligned allocation; the codegen's memory plan assigns every buffer a byte offset into it. */
class Arena {
 public:
  Arena() = default;
  /** Allocates `bytes` (zero-filled) aligned to `align` (a power of two >= alignof(max_align_t)). */
  explicit Arena(size_t bytes, size_t align = 64);
  ~Arena();
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  Arena(Arena &&other) noexcept;
  Arena &operator=(Arena &&other) noexcept;

  /** The byte at `offset`; fail()s if offset + bytes exceeds the arena. */
  void *at(size_t offset, size_t bytes = 0) const;
  real *reals(size_t offset, size_t count = 0) const { return static_cast<real *>(at(offset, count * sizeof(real))); }
  int64_t *i64(size_t offset, size_t count = 0) const { return static_cast<int64_t *>(at(offset, count * 8)); }
  size_t size() const { return size_; }

 private:
  void *base_ = nullptr;
  size_t size_ = 0;
};

// ---------------------------------------------------------------- GEMM (gemm.cpp)

/** What the multiplied operands of a GEMM or convolution hold: any floats, or only values of bfloat16 / binary16
 *  (codegen knows: they are results of --precision bf16/fp16's rounding ops, ir/autocast.h exact_low_types). Their
 *  products are then exact in float32 and in those types' tensor-core arithmetic alike, so the CUDA backend multiplies
 *  on bf16 or fp16 tensor cores with float32 accumulation, as torch.autocast's kernels do, and loses nothing against
 *  the fp32 arithmetic of the cpu backend (which ignores it) but the order of the sums. CLEAVE_LOW_MATH=tf32 makes
 *  the CUDA backend use TF32 tensor cores for them instead (also exact), =fp32 its plain fp32 arithmetic. */
enum class Operands { f32, bf16, fp16 };

/** C = alpha * op(A) * op(B) + beta * C with op(A) [m, k], op(B) [k, n], C [m, n]; lda/ldb/ldc are the row strides
 *  of A, B, C as stored (row-major). beta = 0 ignores C's old contents (even NaN). */
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real *a, int64_t lda,
          const real *b, int64_t ldb, real beta, real *c, int64_t ldc, Operands operands = Operands::f32);
/** `batch` independent GEMMs; matrix i starts at a + i * stride_a (likewise b, c). A stride of 0 broadcasts. */
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, real alpha, const real *a,
                          int64_t lda, int64_t stride_a, const real *b, int64_t ldb, int64_t stride_b, real beta,
                          real *c, int64_t ldc, int64_t stride_c, int64_t batch, Operands operands = Operands::f32);

// ---------------------------------------------------------------- convolution (conv.cpp)

/** X [n, c, x...], W [m, c/group, k...], Y [n, m, y...]; pads = begins then ends (ONNX order). The caller gives y
 *  (it must equal floor((x + pb + pe - d*(k-1) - 1) / s) + 1). Pads may be asymmetric and negative: a spatial block
 *  of a larger convolution (codegen's halo splits) is the convolution of the local blocks of X, W and Y with local
 *  pads, the window of local output o at local tap k reading local input o*s + k*d - pb; reads outside the local X
 *  are padding (forward), or land outside the local dX block and are dropped (conv_backward_data). */
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Dims x, w, y, strides, pads, dilations;  // w: the kernel's spatial dims
  Operands operands = Operands::f32;      // what X and W (dY and W, dY and X in the gradients) hold
};
/** Y = conv(X, W) + B (B [m] may be null). */
void conv_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y);
/** dX = conv_transpose(dY, W). */
void conv_backward_data(const ConvShape &s, const real *dy, const real *w, real *dx);
/** dW = correlation of dY with X. */
void conv_backward_filter(const ConvShape &s, const real *dy, const real *x, real *dw);
/** dB[m] = sum of dY over n and the spatial dims. */
void conv_backward_bias(const ConvShape &s, const real *dy, real *db);

// ---------------------------------------------------------------- pooling (pool.cpp)

/** X [nc, x...] and Y [nc, y...] (nc = N * C). y is given by the caller (ceil_mode decided there); window positions
 *  beyond the padded input are skipped.
 *  Spatial blocks (codegen's halo splits): the buffers may hold blocks of the whole op's tensors. x_begin / y_begin
 *  are the global spatial positions of the first element held of X (dX for avg_pool_backward) and of Y (or dY),
 *  x_full the whole input's spatial extent, which pads and the averaging divisors refer to (empty: 0, 0 and x).
 *  The windows are the global ones at outputs y_begin + [0, y). The forward kernels need every in-tensor tap of
 *  them inside the X block (else fail()); avg_pool_backward writes its dX block only. max_pool_backward reads whole
 *  windows from X and writes the dX block at dx_begin of extent dx (empty: the X block). */
struct PoolShape {
  int64_t nc = 0;
  Dims x, y, kernel, strides, pads, dilations;  // pads: begins then ends
  bool count_include_pad = false;               // average pooling only
  Dims x_begin, y_begin, x_full, dx_begin, dx;  // spatial blocks; all empty for a whole op
};
/** Y = max over each window; indices (may be null) = flat index into the whole X (x_full for a spatial block)
 *  including the nc offset (ONNX's Indices with storage_order 0; the nc offset of the block's first plane is the
 *  caller's). A window with no element of X fail()s. */
void max_pool_forward(const PoolShape &s, const real *x, real *y, int64_t *indices);
/** dX: each dY goes to its window's first maximum in X. */
void max_pool_backward(const PoolShape &s, const real *dy, const real *x, real *dx);
void avg_pool_forward(const PoolShape &s, const real *x, real *y);
void avg_pool_backward(const PoolShape &s, const real *dy, real *dx);
/** Y[i] = sum of X[i, :spatial] / divisor (0: spatial). A block of the spatial dims with the whole op's divisor gives
 *  partial means that add up to the mean. */
void global_avg_pool_forward(int64_t nc, int64_t spatial, const real *x, real *y, int64_t divisor = 0);
/** dX[i, :spatial] = dY[i] / divisor (0: spatial). */
void global_avg_pool_backward(int64_t nc, int64_t spatial, const real *dy, real *dx, int64_t divisor = 0);

// ---------------------------------------------------------------- normalisation and reductions (norm.cpp)

/** Training-mode BatchNormalization over X [n, c, d] (d = product of spatial dims): batch mean and biased variance;
 *  running_mean/var (in/out, may be null) take ONNX's update running = momentum * running + (1 - momentum) * batch;
 *  with `unbiased`, the running variance takes the batch's unbiased variance (M / (M - 1) times the biased one, M
 *  values per channel), as torch's does; saved_mean/saved_invstd (may be null) receive the batch mean and
 *  1/sqrt(var + eps). */
void batch_norm_train_forward(int64_t n, int64_t c, int64_t d, const real *x, const real *scale, const real *bias,
                              real eps, real momentum, real *y, real *running_mean, real *running_var,
                              real *saved_mean, real *saved_invstd, bool unbiased = false);
/** Inference mode: normalises with the running statistics. */
void batch_norm_infer_forward(int64_t n, int64_t c, int64_t d, const real *x, const real *scale, const real *bias,
                              const real *mean, const real *var, real eps, real *y);
/** Gradient of the training-mode forward; dx, dscale, dbias may each be null (scale too where dx is: only dx reads
 *  it). */
void batch_norm_backward(int64_t n, int64_t c, int64_t d, const real *dy, const real *x, const real *scale,
                         const real *saved_mean, const real *saved_invstd, real *dx, real *dscale, real *dbias);
// BatchNormalization with the batch split over ranks: each rank computes partial sums of its shard, the caller
// all-reduces them (all_reduce_sum over the group sharing the channels) and finishes with the global count
// M = (total samples) * d. With one rank these equal the functions above up to rounding.
/** stats [2c] = per channel sum of (x - shift) then sum of (x - shift)^2; shift [c] (may be null = 0) must be the same
 *  on every rank (e.g. the running mean: it keeps the variance free of cancellation). */
void batch_norm_partial_stats(int64_t n, int64_t c, int64_t d, const real *x, const real *shift, real *stats);
/** The training forward from all-reduced stats over `count` = M elements per channel; outputs as
 *  batch_norm_train_forward. */
void batch_norm_train_forward_from_stats(int64_t n, int64_t c, int64_t d, const real *x, const real *scale,
                                         const real *bias, const real *stats, const real *shift, int64_t count,
                                         real eps, real momentum, real *y, real *running_mean, real *running_var,
                                         real *saved_mean, real *saved_invstd, bool unbiased = false);
/** sums [2c] = per channel sum of dY (dbias), then sum of dY * xhat (dscale): all-reduced, they are dB and dscale. */
void batch_norm_backward_partial_sums(int64_t n, int64_t c, int64_t d, const real *dy, const real *x,
                                      const real *saved_mean, const real *saved_invstd, real *sums);
/** dX of the shard from the all-reduced sums and the global count M. */
void batch_norm_backward_data_from_sums(int64_t n, int64_t c, int64_t d, const real *dy, const real *x,
                                        const real *scale, const real *saved_mean, const real *saved_invstd,
                                        const real *sums, int64_t count, real *dx);
struct Comm;
// The same with the all-reduces done over `g` (the ranks that split the batch and spatial dims; every member calls
// it): `count` is M over all of them. The forward all-reduces the sums, then the sums about the global mean (two
// passes, like the whole-batch forward, so the variance has no cancellation); every rank gets the whole statistics
// (running_mean/var, saved_*, dscale, dbias), equal to the whole-batch ones up to rounding.
void batch_norm_train_forward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const real *x,
                                     const real *scale, const real *bias, real eps, real momentum, real *y,
                                     real *running_mean, real *running_var, real *saved_mean, real *saved_invstd,
                                     bool unbiased = false);
void batch_norm_backward_synced(const Comm &g, int64_t count, int64_t n, int64_t c, int64_t d, const real *dy,
                                const real *x, const real *scale, const real *saved_mean, const real *saved_invstd,
                                real *dx, real *dscale, real *dbias);
/** Y = sum (or mean) of X over `axes` (sorted, distinct); Y holds the kept dims in order (keepdims does not change
 *  the data layout). */
void reduce(const Dims &x_shape, const Dims &axes, const real *x, real *y, bool mean);
/** Y = sum of X over `axes` divided by `count`, laid out as reduce(). `count` is the whole tensor's number of reduced
 *  elements: when X is one shard of the reduced dims (a ReduceMean split along them), each rank's Y is its share of
 *  the global mean, and the partial all-reduce sums the shares to it. */
void reduce_mean(const Dims &x_shape, const Dims &axes, int64_t count, const real *x, real *y);

/** Y = max (or min) of X over `axes` (sorted, distinct), laid out as reduce(); NaN propagates. */
void reduce_max(const Dims &x_shape, const Dims &axes, const real *x, real *y, bool min);

// ---------------------------------------------------------------- index and scan ops (index_ops.cpp)
// Each views its tensor as [outer, len, inner] around one axis.

/** y [outer * inner] = the position along len of the max (or min, `min`) of x: the first one, or the last with
 *  `last`; NaN counts as the extreme (numpy, torch). */
void arg_extreme(int64_t outer, int64_t len, int64_t inner, const real *x, int64_t *y, bool min, bool last);
/** y [outer, k, inner] = the positions along len of x's k largest (smallest with !largest) values, largest
 *  (smallest) first; equal values in position order, NaN above every number (torch.topk). O(len^2) per line. */
void top_k(int64_t outer, int64_t len, int64_t inner, const real *x, int64_t *y, int64_t k, bool largest);
/** Running sums of x along len (from the end with `reverse`; without the element itself with `exclusive`),
 *  accumulated in double. */
void cumsum(int64_t outer, int64_t len, int64_t inner, const real *x, real *y, bool exclusive, bool reverse);
/** y [outer, depth, inner] = values[1] where indices [outer * inner] (plus depth if negative) is the position along
 *  depth, else values[0]; values is a 2-element buffer of elements of elem_size bytes (1, 4 or 8: torch exports int64
 *  values, then casts). */
void one_hot(int64_t outer, int64_t depth, int64_t inner, const int64_t *indices, const void *values, void *y,
             size_t elem_size);

// ---------------------------------------------------------------- element-wise and N-d indexing (gather_ops.cpp)
// A negative index counts from the end of its dim; one outside [-dim, dim) fail()s, as in gather(). The dims indexed
// are whole on every rank (their description vars are opaque or read whole), so indices are global = local there.

/** GatherElements: y (ind_shape) [p] = data[p with p[axis] = indices[p]]; data (data_shape) has indices' rank and is
 *  no smaller off the axis. */
void gather_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                     const real *data, real *y);
/** ScatterElements: y (data_shape) = data, then y[p with p[axis] = indices[p]] = updates[p] (or += with `add`) for
 *  every p of ind_shape (updates' shape too). Repeated targets without `add`: the last update wins on the CPU, any one
 *  of them on the GPU (ONNX leaves it undefined). */
void scatter_elements(const Dims &data_shape, const Dims &ind_shape, int64_t axis, const int64_t *indices,
                      const real *data, const real *updates, real *y, bool add);
/** GatherND: y [indices[:-1] + data[batch_dims + k:]] = the slices of data (data_shape) at the k-tuples of indices
 *  (ind_shape, k = its last dim), the first batch_dims dims of both walked together. */
void gather_nd(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
               const real *data, real *y);
/** The adjoint: ddata (data_shape, zeroed first) += dy scattered to the slices gather_nd read; repeats accumulate. */
void gather_nd_backward(const Dims &data_shape, const Dims &ind_shape, int64_t batch_dims, const int64_t *indices,
                        const real *dy, real *ddata);

// ---------------------------------------------------------------- layer normalisation (layer_norm.cpp)

/** LayerNormalization of X viewed as [outer, inner] over each row (inner = the normalised trailing dims), biased
 *  variance: Y = (x - mean) * invstd * scale + bias (bias may be null). mean/invstd [outer] may be null. */
void layer_norm_forward(int64_t outer, int64_t inner, const real *x, const real *scale, const real *bias, real eps,
                        real *y, real *mean, real *invstd);
/** Its gradient from the forward's mean/invstd: dx [outer, inner], dscale/dbias [inner] summed over this shard's
 *  rows (partial sums when the rows are split); each may be null (scale too where dx is). */
void layer_norm_backward(int64_t outer, int64_t inner, const real *dy, const real *x, const real *scale,
                         const real *mean, const real *invstd, real *dx, real *dscale, real *dbias);

// ---------------------------------------------------------------- image layers (instance_norm.cpp, conv_transpose.cpp,
//                                                                  resize.cpp)

/** InstanceNormalization of X [n, c, s] (s = the spatial size; n, c this shard's planes): biased statistics per
 *  plane, Y = (x - mean) * invstd * scale[c] + bias[c]; mean/invstd [n, c] may be null. */
void instance_norm_forward(int64_t n, int64_t c, int64_t s, const real *x, const real *scale, const real *bias,
                           real eps, real *y, real *mean, real *invstd);
/** Its gradient from the forward's mean/invstd: dx [n, c, s], dscale/dbias [c] summed over this shard's n and s
 *  (partial sums when the batch is split); each may be null (scale too where dx is). */
void instance_norm_backward(int64_t n, int64_t c, int64_t s, const real *dy, const real *x, const real *scale,
                            const real *mean, const real *invstd, real *dx, real *dscale, real *dbias);

/** ConvTranspose: Y = conv_backward_data(s, X, W) + B[channel] (B may be null). `s` describes the Conv whose input
 *  is Y (s.c = Y's channels, s.x its spatial dims) and whose output is X (s.m = X's channels, s.y). */
void conv_transpose_forward(const ConvShape &s, const real *x, const real *w, const real *b, real *y);

/** Resize over the spatial dims of `planes` planes (n * c), ONNX semantics: output position o of a dim reads the
 *  source coordinate of `coord` (scale = scales[d], the resized length scale * x[d], a real number), then the
 *  nearest input (rounded by `nearest`, clamped), or the two inputs around it (clamped to [0, x[d] - 1]) weighted
 *  linearly, or the four around it weighted by Keys' cubic kernel with coefficient `cubic_a` (indices clamped to the
 *  edge; with `exclude_outside` the taps outside the input get weight 0 and the rest are renormalised); an N-d
 *  resize multiplies the weights of every dim. */
enum class ResizeMode { nearest, linear, cubic };
enum class ResizeCoord { half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn };
enum class ResizeNearest { round_prefer_floor, round_prefer_ceil, floor, ceil };
struct ResizeShape {
  int64_t planes = 0;
  Dims x, y;                   // spatial dims
  std::vector<double> scales;  // per spatial dim
  ResizeMode mode = ResizeMode::nearest;
  ResizeCoord coord = ResizeCoord::half_pixel;
  ResizeNearest nearest = ResizeNearest::round_prefer_floor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};
void resize_forward(const ResizeShape &s, const real *x, real *y);
/** dX = the adjoint of resize_forward: each dY scattered back with its weights (dX is overwritten). */
void resize_backward(const ResizeShape &s, const real *dy, real *dx);

// ---------------------------------------------------------------- softmax and losses (loss.cpp)

/** Softmax (or log-softmax) of X viewed as [outer, dim, inner] along the middle axis. */
void softmax_forward(int64_t outer, int64_t dim, int64_t inner, const real *x, real *y, bool log);
/** dX from dY and the forward's output Y: softmax Y*(dY - sum dY*Y); log-softmax dY - exp(Y)*sum dY. */
void softmax_backward(int64_t outer, int64_t dim, int64_t inner, const real *dy, const real *y, real *dx, bool log);

enum class Reduction { none, sum, mean };
/** A loss over input [n, c, d] (class axis 1, d = product of trailing dims) and labels [n, d]. */
struct LossShape {
  int64_t n = 0, c = 0, d = 1;
  Reduction reduction = Reduction::mean;
  bool has_ignore_index = false;
  int64_t ignore_index = -100;
  /** For mean: the divisor when > 0 (the global weight total when the batch is split over ranks); else the local
   *  sum of the weights of non-ignored positions. */
  double mean_divisor = 0;
  /** For mean, CUDA backend: the divisor in device memory when not null (sync_loss_divisor), read by the kernels
   *  instead of mean_divisor, so that no host round trip sits inside the step. */
  const real *mean_divisor_at = nullptr;
};
/** SoftmaxCrossEntropyLoss: loss ([n, d] for none, else a scalar); log_prob [n, c, d] may be null. weights [c] may
 *  be null. A label outside [0, c) that is not ignore_index fail()s. */
void softmax_cross_entropy_forward(const LossShape &s, const real *scores, const int64_t *labels,
                                   const real *weights, real *loss, real *log_prob);
/** dscores from dloss (shaped like loss) and the forward's log_prob. */
void softmax_cross_entropy_backward(const LossShape &s, const real *dloss, const real *log_prob,
                                    const int64_t *labels, const real *weights, real *dscores);
/** NegativeLogLikelihoodLoss over log-probabilities `input` [n, c, d]. */
void nll_forward(const LossShape &s, const real *input, const int64_t *labels, const real *weights, real *loss);
void nll_backward(const LossShape &s, const real *dloss, const int64_t *labels, const real *weights,
                  real *dinput);
/** The sum of weights over non-ignored positions (what mean divides by), for summing across ranks. */
double loss_weight_total(const LossShape &s, const int64_t *labels, const real *weights);
/** loss_weight_total summed over the ranks of `g` (every member calls it): the mean_divisor of a weighted-mean loss
 *  whose positions are split over them. */
double loss_weight_total_synced(const Comm &g, const LossShape &s, const int64_t *labels, const real *weights);
/** Sets the divisor of a mean loss whose positions are split over the ranks of `g` (every member calls it) to
 *  loss_weight_total_synced: in s.mean_divisor on the cpu backend; under CUDA on the device (s.mean_divisor_at,
 *  summed by NCCL; staged ranks as the cpu backend). */
void sync_loss_divisor(const Comm &g, LossShape &s, const int64_t *labels, const real *weights);

// ---------------------------------------------------------------- layout ops (layout.cpp)

/** Y (out_shape) = X (in_shape) broadcast numpy-style (in_shape right-aligned, size-1 dims repeated). */
void broadcast(const Dims &in_shape, const Dims &out_shape, const real *x, real *y);
/** Y = sum of X (in_shape) down to out_shape: the adjoint of broadcast (gradients of broadcast operands). */
void reduce_to_shape(const Dims &in_shape, const Dims &out_shape, const real *x, real *y);
/** broadcast() for elements of any size (masks, int64 indices): elem_size bytes per element. */
void broadcast_bytes(const Dims &in_shape, const Dims &out_shape, const void *x, void *y, size_t elem_size);
/** Y = X padded by pads (all begins, then all ends; negative values crop) with `value` outside X (constant Pad). */
void pad_constant(const Dims &x_shape, const Dims &pads, real value, const real *x, real *y);
/** Y[i_perm[0], ...] = X[i...]: Y's dim d is X's dim perm[d]. */
void transpose(const Dims &shape, const Dims &perm, const real *x, real *y, size_t elem_size = sizeof(real));
/** Y = X[starts[d] : ends[d] : steps[d]] on every dim (one entry per dim, already clamped; steps may be negative). */
void slice(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const real *x, real *y);
/** dX = zeros with dY written where slice() read. */
void slice_backward(const Dims &shape, const Dims &starts, const Dims &ends, const Dims &steps, const real *dy,
                    real *dx);
/** slice() and slice_backward() of literal dims, as generated code calls them: a braced list binds to an
 *  initializer_list with no std::vector built at the call site (g++ spent 80 s of DenseNet-201's program on the
 *  vectors of 4,200 such calls). Defined once for both backends (common/literal_dims.cpp). */
using DimsLiteral = std::initializer_list<int64_t>;
void slice(DimsLiteral shape, DimsLiteral starts, DimsLiteral ends, DimsLiteral steps, const real *x, real *y);
void slice_backward(DimsLiteral shape, DimsLiteral starts, DimsLiteral ends, DimsLiteral steps, const real *dy,
                    real *dx);
/** Y = concatenation of the parts along `axis`; every part has y_shape except on axis. */
void concat(const std::vector<const real *> &parts, const std::vector<Dims> &shapes, int64_t axis, real *y);
/** The inverse of concat: parts[i] receives its extent of X along `axis`. */
void split(const Dims &x_shape, int64_t axis, const Dims &sizes, const real *x, const std::vector<real *> &parts);

/** Gather along `axis` (ONNX Gather) from a shard of the data: the local data (data_shape) holds rows
 *  [index_base, index_base + data_shape[axis]) of a whole of global_dim rows on that axis. Y has shape
 *  data_shape[:axis] + [num_indices] + data_shape[axis+1:]. Negative indices wrap by global_dim; an index outside
 *  [-global_dim, global_dim) fail()s; rows held by another shard read as zeros (sum the shards' outputs). */
void gather(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices, const real *data,
            real *y, int64_t global_dim, int64_t index_base = 0);
/** The adjoint: ddata (data_shape, zeroed first) += dY scattered to the local rows; repeated indices accumulate. */
void gather_backward(const Dims &data_shape, int64_t axis, const int64_t *indices, int64_t num_indices,
                     const real *dy, real *ddata, int64_t global_dim, int64_t index_base = 0);

/** One box of a region copy: the hyper-rectangle [src_start, src_start + extent) of a source buffer of src_shape
 *  goes to [dst_start, dst_start + extent) of the destination. */
struct Box {
  const void *src = nullptr;
  Dims src_shape, src_start, extent, dst_start;
};
/** Tofu's MultiFetch: gathers several strided boxes (of equal rank to dst_shape) into one destination buffer in one
 *  call. Boxes must lie inside their source and the destination; elem_size is the element size in bytes. */
void region_copy(const std::vector<Box> &boxes, void *dst, const Dims &dst_shape, size_t elem_size = sizeof(real));
/** region_copy() of one box given by literal dims (see DimsLiteral). */
void region_copy(const void *src, DimsLiteral src_shape, DimsLiteral src_start, DimsLiteral extent,
                 DimsLiteral dst_start, void *dst, DimsLiteral dst_shape, size_t elem_size = sizeof(real));
/** Y (contiguous, of shape) = the elements of X at offset + sum over d of i[d] * strides[d] (in elements; strides
 *  >= 0), in row-major order of shape: a strided view of X copied out, as codegen composes a box cut out of a buffer
 *  and then transposed (codegen/compose_moves.h) into one pass. */
void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y,
               size_t elem_size = sizeof(real));
void view_copy(const void *x, DimsLiteral shape, DimsLiteral strides, int64_t offset, void *y,
               size_t elem_size = sizeof(real));
/** view_copy() into a strided view of Y as well: Y[y_offset + sum over d of i[d] * y_strides[d]] = X[offset + sum
 *  over d of i[d] * strides[d]] (a part of a Concat written into its place in the output). The places written must
 *  not overlap. */
void view_copy(const void *x, const Dims &shape, const Dims &strides, int64_t offset, void *y, const Dims &y_strides,
               int64_t y_offset, size_t elem_size = sizeof(real));
void view_copy(const void *x, DimsLiteral shape, DimsLiteral strides, int64_t offset, void *y, DimsLiteral y_strides,
               int64_t y_offset, size_t elem_size = sizeof(real));

// ---------------------------------------------------------------- raw bytes (layout.cpp)
// Generated code moves bytes only through these (never memcpy/memset or a dereference), so the same rank source
// runs on a backend whose buffers are device memory.

/** dst[0, bytes) = src[0, bytes); the ranges must not overlap. */
void copy(void *dst, const void *src, int64_t bytes);
/** Every byte of dst[0, bytes) = value. */
void fill_bytes(void *dst, uint8_t value, int64_t bytes);

// ---------------------------------------------------------------- elementwise (header-only, backend-independent)

// Compiled by nvcc (the CUDA backend and the rank sources of a CUDA bundle), map/map_index launch the functor as a
// grid-stride kernel on the backend's compute stream; compiled by a host compiler they are plain loops.
#if defined(__CUDACC__)
/** The check behind CLEAVE_CUDA (cuda/context.cu): on an error prints
 *  `cleave rank R: cudaXxx failed at file:line: <cudaGetErrorString>` and aborts the job. */
void check_cuda(cudaError_t code, const char *call, const char *file, int line);
#define CLEAVE_CUDA(fn, ...) ::cleave::rt::check_cuda(fn(__VA_ARGS__), #fn, __FILE__, __LINE__)
/** The stream every kernel and library call of the CUDA backend runs on (cuda/context.cu). */
cudaStream_t compute_stream();
/** Launches `kernel` on the compute stream and checks the launch (a bad configuration is reported at once; faults in
 *  the kernel surface at the next checked call). The only way the runtime and generated code launch kernels. */
#define CLEAVE_LAUNCH(kernel, blocks, threads, ...)                                                       \
  do {                                                                                                   \
    kernel<<<(blocks), (threads), 0, ::cleave::rt::compute_stream()>>>(__VA_ARGS__);                     \
    ::cleave::rt::check_cuda(cudaGetLastError(), "launch of " #kernel, __FILE__, __LINE__);              \
  } while (0)
namespace detail {
constexpr int kThreads = 256;
/** Blocks for a grid-stride loop over n elements (at least 1, capped: the loop covers the rest). */
inline unsigned grid_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}
/** Whether every pointer is 16-byte aligned: float4 loads and stores may then cover them. */
template <typename... P>
inline bool aligned16(const P *...p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}
/** f applied to each lane of the operands' float4s. */
template <typename F, typename... V>
__device__ inline float4 apply4(const F &f, const V &...v) {
  return make_float4(f(v.x...), f(v.y...), f(v.z...), f(v.w...));
}
/** The grid-stride loop of map over n elements, or, with vec4 (n a multiple of 4, every operand float and 16-byte
 *  aligned), over its n / 4 groups of four with one float4 load per operand and one store: a quarter of the index
 *  arithmetic and memory transactions. Index type I: 32 bits below 2^31 elements. */
template <typename I, typename F, typename... In>
__global__ void map_kernel(I n, bool vec4, F f, real *out, const In *...ins) {
  const I first = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  const I stride = static_cast<I>(blockDim.x) * gridDim.x;
  if constexpr ((std::is_same_v<In, float> && ...)) {
    if (vec4) {
      for (I i = first; i < n / 4; i += stride)
        reinterpret_cast<float4 *>(out)[i] = apply4(f, reinterpret_cast<const float4 *>(ins)[i]...);
      return;
    }
  }
  for (I i = first; i < n; i += stride) out[i] = f(ins[i]...);
}
/** map_block's loop; with vec4 (n a multiple of 4, inner a multiple of 4 or inner 1 and mid a multiple of 4, every
 *  full operand float and 16-byte aligned) over groups of four elements, which then read one block value, or four
 *  consecutive ones of a row. */
template <typename I, typename F, typename... In>
__global__ void map_block_kernel(I n, I inner, I mid, bool vec4, F f, real *out, const real *block,
                                 const In *...fulls) {
  const I first = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x;
  const I stride = static_cast<I>(blockDim.x) * gridDim.x;
  if constexpr ((std::is_same_v<In, float> && ...)) {
    if (vec4) {
      for (I i = first; i < n / 4; i += stride) {
        float4 b;
        if (inner == 1) {
          const I m = 4 * i % mid;
          b = make_float4(block[m], block[m + 1], block[m + 2], block[m + 3]);
        } else {
          const float v = block[4 * i / inner % mid];
          b = make_float4(v, v, v, v);
        }
        reinterpret_cast<float4 *>(out)[i] = apply4(f, b, reinterpret_cast<const float4 *>(fulls)[i]...);
      }
      return;
    }
  }
  for (I i = first; i < n; i += stride) out[i] = f(block[i / inner % mid], fulls[i]...);
}
template <typename F>
__global__ void map_index_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    f(i);
}
}  // namespace detail
#endif

// Host loops of map/map_index carry no dependence between iterations (element i reads and writes index i only,
// out may alias an input exactly): saying so lets -O2 vectorise them without alias checks, which turns the
// data-dependent branches of functors like ReLU's into blends.
#if defined(__clang__)
#define CLEAVE_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define CLEAVE_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define CLEAVE_INDEPENDENT_ITERATIONS
#endif

/** out[i] = f(ins[i]...) for i in [0, n). f is a generated fused functor marked CLEAVE_HD so both backends run the
 *  same body; out may alias an input (each element is read and written by one thread). */
template <typename F, typename... In>
void map(int64_t n, F f, real *out, const In *...ins) {
#if defined(__CUDACC__)
  if (n <= 0) return;
  const bool vec4 = (std::is_same_v<In, float> && ...) && n % 4 == 0 && detail::aligned16(out, ins...);
  const int64_t threads = vec4 ? n / 4 : n;
  if (n < (int64_t{1} << 31)) {
    auto *map32 = detail::map_kernel<uint32_t, F, In...>;
    CLEAVE_LAUNCH(map32, detail::grid_for(threads), detail::kThreads, static_cast<uint32_t>(n), vec4, f, out,
                  ins...);
  } else {
    auto *map64 = detail::map_kernel<int64_t, F, In...>;
    CLEAVE_LAUNCH(map64, detail::grid_for(threads), detail::kThreads, n, vec4, f, out, ins...);
  }
#else
  CLEAVE_INDEPENDENT_ITERATIONS
  for (int64_t i = 0; i < n; ++i) out[i] = f(ins[i]...);
#endif
}
/** out[i] = f(block[i / inner % mid], fulls[i]...) for i in [0, n): a map with one operand that broadcasts as one
 *  block of the output's dims (codegen's bias rows, inner 1; per-channel scales, inner the plane's size), read in
 *  place instead of broadcast into a buffer of the output's size first, and any number of operands of the output's
 *  size (a fused chain's). n is a multiple of inner * mid (the output's size), inner and mid at least 1. out may
 *  alias an operand of the output's size. */
template <typename F, typename... In>
void map_block(int64_t n, int64_t inner, int64_t mid, F f, real *out, const real *block, const In *...fulls) {
#if defined(__CUDACC__)
  if (n <= 0) return;
  const bool vec4 = (std::is_same_v<In, float> && ...) && n % 4 == 0 &&
                    (inner % 4 == 0 || (inner == 1 && mid % 4 == 0)) && detail::aligned16(out, fulls...);
  const int64_t threads = vec4 ? n / 4 : n;
  if (n < (int64_t{1} << 31)) {
    auto *map_block32 = detail::map_block_kernel<uint32_t, F, In...>;
    CLEAVE_LAUNCH(map_block32, detail::grid_for(threads), detail::kThreads, static_cast<uint32_t>(n),
                  static_cast<uint32_t>(inner), static_cast<uint32_t>(mid), vec4, f, out, block, fulls...);
  } else {
    auto *map_block64 = detail::map_block_kernel<int64_t, F, In...>;
    CLEAVE_LAUNCH(map_block64, detail::grid_for(threads), detail::kThreads, n, inner, mid, vec4, f, out, block,
                  fulls...);
  }
#else
  // Loops over the block's elements, so the innermost loop runs over contiguous elements with one block value (or,
  // for a bias row, over the row and the block alike) and vectorises.
  for (int64_t o = 0; o < n; o += inner * mid) {
    if (inner == 1) {
      CLEAVE_INDEPENDENT_ITERATIONS
      for (int64_t m = 0; m < mid; ++m) out[o + m] = f(block[m], fulls[o + m]...);
      continue;
    }
    for (int64_t m = 0; m < mid; ++m) {
      const real v = block[m];
      const int64_t at = o + m * inner;
      CLEAVE_INDEPENDENT_ITERATIONS
      for (int64_t k = 0; k < inner; ++k) out[at + k] = f(v, fulls[at + k]...);
    }
  }
#endif
}
/** f(i) for i in [0, n): for functors with several outputs or that index their operands themselves. */
template <typename F>
void map_index(int64_t n, F f) {
#if defined(__CUDACC__)
  if (n > 0) CLEAVE_LAUNCH(detail::map_index_kernel, detail::grid_for(n), detail::kThreads, n, f);
#else
  CLEAVE_INDEPENDENT_ITERATIONS
  for (int64_t i = 0; i < n; ++i) f(i);
#endif
}

// ---------------------------------------------------------------- optimizers and dropout (optim.cpp)

namespace detail {
/** Set by TrainingRun::unscale_grads for a step whose updates are skipped (a gradient was not finite under loss
 *  scaling): sgd_step, momentum_step and adam_step then leave their parameter and state as they were. */
extern bool g_skip_updates;
/** Steps skipped so far (a resumed run's included): adam_step's bias correction counts the updates made,
 *  step - g_skipped_updates, as torch.optim.Adam counts its steps. */
extern int64_t g_skipped_updates;
/** In a skipped step (g_skip_updates): copies each (input, output) pair's n floats where they differ and returns
 *  true, and the optimizer step returns at once; otherwise false. */
bool skipped_update(int64_t n, std::initializer_list<std::pair<const real *, real *>> kept);
}  // namespace detail

/** torch.optim.SGD: p' = p - lr * (g + wd * p). p_out may alias p. */
void sgd_step(int64_t n, const real *p, const real *g, real lr, real weight_decay, real *p_out);
/** torch.optim.SGD with momentum (dampening 0): b' = mu * b + (g + wd * p); p' = p - lr * (nesterov ? g' + mu b' : b').
 *  Outputs may alias their inputs. */
void momentum_step(int64_t n, const real *p, const real *g, const real *b, real lr, real momentum,
                   real weight_decay, bool nesterov, real *p_out, real *b_out);
/** torch.optim.Adam (decoupled = false) / AdamW (true) at step t >= 1 (less the steps loss scaling skipped, as
 *  detail::g_skipped_updates says). Outputs may alias their inputs. */
void adam_step(int64_t n, const real *p, const real *g, const real *m, const real *v, real lr, real beta1,
               real beta2, real eps, real weight_decay, bool decoupled, int64_t step, real *p_out, real *m_out,
               real *v_out);

/** The sum of x[i]^2 over [0, n), accumulated in double (gradient norms). */
double sum_of_squares(const real *x, int64_t n);
/** The sum of squares of several arrays (x, n), in double, with one round trip to the host under CUDA: gradient
 *  norms and loss scaling's overflow check (the sum is finite exactly when every element is). */
double sum_of_squares(const std::vector<std::pair<const real *, int64_t>> &parts);
/** x[i] *= s over [0, n) (gradient clipping). */
void scale_in_place(real *x, int64_t n, real s);
/** y[i] += x[i] over [0, n) (gradient accumulation). */
void add_in_place(real *y, const real *x, int64_t n);

/** ai.onnx.preview.training Momentum for one tensor (R = lr, T = update count): g' = norm * x + g;
 *  v' = alpha * v + (T > 0 ? beta : 1) * g'; x' = x - lr * v' (standard) or x - lr * (g' + alpha * v') (nesterov). */
void onnx_momentum_step(int64_t n, const real *x, const real *g, const real *v, real lr, int64_t t, real alpha,
                        real beta, real norm_coefficient, bool nesterov, real *x_out, real *v_out);
/** ai.onnx.preview.training Adam for one tensor; bias correction only when T > 0. */
void onnx_adam_step(int64_t n, const real *x, const real *g, const real *v, const real *h, real lr, int64_t t,
                    real alpha, real beta, real epsilon, real norm_coefficient, real norm_coefficient_post,
                    real *x_out, real *v_out, real *h_out);
/** ai.onnx.preview.training Adagrad for one tensor: lr' = lr / (1 + T * decay_factor). */
void onnx_adagrad_step(int64_t n, const real *x, const real *g, const real *h, real lr, int64_t t,
                       real decay_factor, real epsilon, real norm_coefficient, real *x_out, real *h_out);

/** Training-mode Dropout of a shard: element (i...) of the local [shape] tensor is global element
 *  sum((global_offset[d] + i[d]) * global_strides[d]); it is kept iff dropout_keep(seed, step, that index, ratio),
 *  and scaled by 1/(1-ratio). mask (may be null) gets 1 or 0. Results do not depend on the split. */
void dropout_forward(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed,
                     int64_t step, real ratio, const real *x, real *y, uint8_t *mask);
/** RandomLike of a shard: element (i...) of the local [shape] tensor is global element sum((global_offset[d] + i[d]) *
 *  global_strides[d]) and gets rng_draw(normal, a, b, seed, step, that index). Results do not depend on the split. */
void random_like(const Dims &shape, const Dims &global_offset, const Dims &global_strides, uint64_t seed, int64_t step,
                 bool normal, real a, real b, real *y);
/** dX = mask ? dY / (1 - ratio) : 0. */
void dropout_backward(int64_t n, real ratio, const real *dy, const uint8_t *mask, real *dx);

// ---------------------------------------------------------------- MPI communication (mpi.cpp)

/** An ordered device group: member i of `ranks` has rank i in the communicator. */
struct Comm {
  std::vector<int> ranks;  // world ranks, in group order
  int index = -1;          // this process's position in ranks
  void *handle = nullptr;  // the MPI_Comm (opaque here so rt.h does not need mpi.h)
  int size() const { return static_cast<int>(ranks.size()); }
};
/** Creates the communicators of `groups` (each a list of distinct world ranks; member i gets rank i), in order, by
 *  splitting the world: MPI_Comm_split on the CPU, ncclCommSplit (and MPI_Comm_split) on CUDA. Collective over EVERY
 *  rank of the world, each passing the same list (checked: else every rank fails); a rank outside a group takes part
 *  in its split without joining it. Groups created by an earlier call are skipped. Generated programs call it once
 *  at startup with every group of the bundle. */
void create_groups(const std::vector<std::vector<int>> &groups);
/** The communicator of `ranks`, made by create_groups; this process must be a member. */
const Comm &group(const std::vector<int> &ranks);

/** recv = elementwise sum over the group of send (count floats). send == recv is in place. */
void all_reduce_sum(const Comm &c, const real *send, real *recv, int64_t count);
/** recv [size * count] = concatenation of every member's send [count], in group order. */
void all_gather(const Comm &c, const real *send, real *recv, int64_t count);
/** Member i receives into recv [count] block i of the sum over the group of send [size * count]. */
void reduce_scatter_sum(const Comm &c, const real *send, real *recv, int64_t count);
/** Member i sends block j of send [size * count] to member j, which stores it as block i of recv. */
void all_to_all(const Comm &c, const real *send, real *recv, int64_t count);
/** An all-reduce in flight: started by all_reduce_sum_start, completed by wait. Move-only; one that is destroyed or
 *  overwritten before its wait fail()s (naming its group): on cpu its reduction would never run (and the group's later
 *  collectives would pair with the wrong partners), on cuda the compute stream's later kernels would race with it
 *  and its event would leak. Not while an exception unwinds: that error is the one to report. */
class Pending {
 public:
  Pending() = default;
  Pending(const Comm *comm, void *request) : comm(comm), request(request) {}
  Pending(const Pending &) = delete;
  Pending &operator=(const Pending &) = delete;
  Pending(Pending &&other) noexcept : comm(other.comm), request(other.request) { other.request = nullptr; }
  Pending &operator=(Pending &&other) {
    if (this != &other) {
      if (request) fail(what() + " was overwritten before its wait (rt::wait)");
      comm = other.comm;
      request = other.request;
      other.request = nullptr;
    }
    return *this;
  }
  ~Pending() {
    if (request && std::uncaught_exceptions() == 0) fail(what() + " was started and never waited for (rt::wait)");
  }

 private:
  friend void wait(Pending &p);
  std::string what() const {
    std::string s = "an all-reduce on group [";
    for (size_t i = 0; comm && i < comm->ranks.size(); ++i) s += (i ? "," : "") + std::to_string(comm->ranks[i]);
    return s + "]";
  }

  const Comm *comm = nullptr;
  void *request = nullptr;  // the backend's handle: its deferred reduction (cpu), a CUDA event (cuda)
};
/** Starts summing buf [count] over the group in place and returns at once; buf must be neither read nor written
 *  until wait(). Like blocking collectives, started collectives must be started in the same order on every member,
 *  and waited for in the same order too (with the group's blocking collectives at the same places in between).
 *  Generated code starts a partial tensor's reduction right after the kernel producing it and waits before its
 *  first reader, so the reduction overlaps the kernels in between (cuda: on the communication stream; cpu: no
 *  overlap: MPI would progress an MPI_Iallreduce only inside MPI calls, so the reduction is a blocking all-reduce
 *  run by wait()). */
Pending all_reduce_sum_start(const Comm &c, real *buf, int64_t count);
/** Completes a started collective: cpu runs it (blocking); cuda makes the compute stream's later work wait
 *  for it. */
void wait(Pending &p);
/** buf [count] of member `root` (a group index) is copied to every member. */
void broadcast(const Comm &c, real *buf, int64_t count, int root);

/** One transfer of a grouped send/recv. peer is a world rank; bytes are sent as raw bytes. */
struct Transfer {
  enum Dir { send, recv } dir = send;
  int peer = 0;
  void *ptr = nullptr;
  int64_t bytes = 0;
};
/** Posts every transfer, then waits for all of them: the generic lowering of derived communication. Transfers
 *  between the same pair of ranks match in the order they are listed on each side. */
void send_recv(const std::vector<Transfer> &transfers);
/** Blocks until every world rank arrives. */
void barrier();
/** Blocks until the work this rank has issued so far has finished: on cuda the compute stream, which every blocking
 *  collective's completion joins (a started collective finishes at its wait, not here); on cpu every call has already
 *  finished when it returns. For timing from the host (runtime/bench). */
void synchronize();

// ---------------------------------------------------------------- files (io.cpp)

/** A .npy array (little-endian f4/f8/i4/i8, C order) opened for sample-wise reading; dim 0 indexes samples. */
struct NpyFile {
  std::string path;
  char kind = 'f';       // 'f' or 'i'
  int elem_size = 4;     // bytes per element in the file
  Dims shape;
  int64_t data_offset = 0;  // byte offset of the data in the file
  int64_t sample_elems = 1;  // elements per sample
  /** Elements of the fed tensor's dims before its sample axis: `count` samples are laid out [outer, count,
   *  sample_elems / outer] (1: sample-major, as in the file). */
  int64_t outer = 1;
};
/** Copies `bytes` of a backend buffer (device memory under CUDA) into host memory, finished when it returns. */
void copy_to_host(void *dst, const void *src, int64_t bytes);
/** Copies `bytes` of host memory into a backend buffer, finished when it returns. */
void copy_from_host(void *dst, const void *src, int64_t bytes);
/** Parses the header; fail()s naming the file on anything else than the formats above. */
NpyFile npy_open(const std::string &path);
/** Reads samples (first + i) mod shape[0] for i in [0, count) into dst (count * sample_elems values, laid out as
 *  f.outer says), converting to the runtime's floating type. Only those samples are read from disk. */
void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, real *dst);
/** As above, converting integer files to int64 (labels). */
void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, int64_t *dst);

/** A named buffer of a checkpoint: the box [begin, end) of a tensor of `shape` and `dtype` ("f32", "i64"...). The
 *  layout (dtype, shape, begin, end) may be left empty: such a buffer is matched by name and size only. */
struct NamedBuffer {
  std::string name;
  void *ptr = nullptr;
  int64_t bytes = 0;
  std::string dtype;
  Dims shape, begin, end;
};
/** Writes the buffers (names, layouts, raw bytes) to `path` (a raw little-endian format owned by common/host_io.cpp)
 *  durably: into a temporary file beside it, fsync'ed, then renamed over `path`, so `path` is always either the old
 *  file or the whole new one. */
void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers);
/** Reads `path` into the buffers; fail()s naming the buffer if a name is missing, its size differs, or both sides
 *  have a layout and they differ. Buffers of the file that none of `buffers` names are skipped. */
void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers);

// ---------------------------------------------------------------- training runs (common/training.cpp)

/** A rank program's run: its flags, where its state comes from, checkpoints, the learning-rate schedule, progress.
 *  Every rank program parses the same flags (so every bundle offers the same ones):
 *    --steps K               the run's last step (steps count from 1 and include those before a resume)
 *    --weights FILE          the initial state (the bundle's weights/rank_<r>.bin, or weights/ranks.bin for all)
 *    NAME=FILE.npy           a graph input's data (first dim = samples; pass p reads samples from (p-1)*batch on,
 *                            modulo the file's count)
 *    --accumulate K          K passes (data, forward, backward) per step, the updates with their mean gradient;
 *                            the loss line shows the passes' mean loss (BatchNorm statistics update every pass)
 *    --epochs E              the last step is E * samples / (batch * K) (instead of --steps)
 *    --shuffle SEED          each epoch reads the samples in its own permutation (from SEED and the epoch alone, so
 *                            every plan and rank count reads the same batches)
 *    --save PREFIX           after the last step, write the trained tensors to PREFIX.rank_<r>.bin
 *    --checkpoint-dir DIR    write checkpoints DIR/step-<k>/ (rank_<r>.bin per rank, then manifest.json by rank 0,
 *                            last: a checkpoint without a manifest is incomplete and never read)
 *    --checkpoint-every N    every N steps (and at the last step, and when a stop signal arrives; default 1000)
 *    --keep K                keep the newest K complete checkpoints (default 2; 0 keeps all)
 *    --resume DIR|auto       continue from the newest complete checkpoint under DIR (or DIR itself when it holds a
 *                            manifest), bit-identically; `auto`: the newest under --checkpoint-dir, if there is one
 *    --lr-schedule S         constant|step|multistep|cosine|linear|onecycle, with --warmup-steps W, --min-lr X,
 *                            --step-size N, --milestones A,B,..., --gamma G (torch.optim.lr_scheduler; lr())
 *    --clip-grad-norm X      scale the gradients by min(1, X / (norm + 1e-6)), norm = the 2-norm of every gradient
 *                            shard on every rank, each box counted once (torch.nn.utils.clip_grad_norm_)
 *    --log-json FILE         rank 0 appends one JSON object per step: step, loss, lr, grad_norm, seconds (and
 *                            one per validation: step, val_loss, val_accuracy)
 *    --cuda-graphs on|off    CUDA backend: replay the steps as a CUDA graph (default on; CLEAVE_CUDA_GRAPHS=0 turns
 *                            it off too; run_step)
 *    --val-data NAME=FILE    a graph input's validation samples (one flag per input, or NAME=FILE,NAME=FILE)
 *    --val-every N           validate after every N steps and after the last (default: after the last only): the
 *                            forward pass in inference mode (BatchNorm's running statistics, no Dropout) over every
 *                            validation sample, the last batch wrapping around to the first samples but counting
 *                            only the new ones; rank 0 prints `val <k> loss <v> accuracy <a>` (validation.h)
 *  SIGUSR1 or SIGTERM (Slurm's warning before a time limit or preemption) makes every rank write a checkpoint after
 *  the step in progress and exit with code kStoppedForResume; with --checkpoint-dir the ranks agree on the stop step
 *  by one small all-reduce per step. Rank 0 shows progress (step/total, loss, samples/s, ETA) at most once a second:
 *  on stderr when CLEAVE_PROGRESS=1 or stderr is a terminal, on /dev/tty when CLEAVE_PROGRESS=tty. */
class TrainingRun {
 public:
  /** Exit code of a run stopped by a signal after writing its checkpoint (resume it with --resume). */
  static constexpr int kStoppedForResume = 75;

  /** Parses the arguments (after init()); fail()s naming a bad flag. `batch` is the samples per step. */
  TrainingRun(int argc, char **argv, int64_t batch);
  /** Loads `state` (every persistent buffer, with layouts) from the checkpoint --resume names, else --weights, and
   *  keeps it for the checkpoints. */
  void load(std::vector<NamedBuffer> state);
  /** The .npy file given for graph input `name`, whose tensor has `outer` elements before its sample axis
   *  (NpyFile::outer); fail()s when none was given. */
  NpyFile data(const std::string &name, int64_t outer = 1);
  /** Passes per step (--accumulate). */
  int64_t accumulation() const { return accumulate_; }
  /** The pass number (from 1) of pass `micro` of step `step`: the data position and Dropout's key. */
  int64_t pass(int64_t step, int64_t micro) const { return (step - 1) * accumulate_ + micro + 1; }
  /** npy_read_samples of the sample stream's [first, first + count) (--shuffle: through each epoch's permutation). */
  void read_samples(const NpyFile &f, int64_t first, int64_t count, real *dst);
  void read_samples(const NpyFile &f, int64_t first, int64_t count, int64_t *dst);

  /** The first step to run: 1, or the step after the resumed checkpoint's. */
  int64_t first_step() const { return first_step_; }
  /** The last step to run (--steps). */
  int64_t last_step() const { return last_step_; }
  /** The learning rate of step `step` for an optimizer whose base rate is `base`, as torch.optim.lr_scheduler would
   *  have set it before that step's update (computed in double, rounded to that type as torch's kernels do). */
  real lr(real base, int64_t step);
  /** A gradient shard an optimizer update of this rank reads: `counted` for the first rank holding its box. */
  struct GradShard {
    real *ptr = nullptr;
    int64_t n = 0;
    bool counted = true;
  };
  /** Between the gradients and the updates of step `step` (every rank calls it): with --clip-grad-norm or
   *  --log-json, the global gradient norm (an all-reduce over the world), fail()ing on a non-finite one; with
   *  --clip-grad-norm the shards scaled in place. Otherwise, or in a step loss scaling skips (unscale_grads),
   *  nothing. */
  void clip_grads(const std::vector<GradShard> &grads, int64_t step);
  /** Dynamic loss scaling (cleave compile --precision fp16 or --loss-scale), set up after load(): the scale starts
   *  at `init` (or the resumed checkpoint's), doubles after `growth_interval` steps in a row without overflow, and is
   *  written into `scale` (the backward pass's seed; null on a rank that holds none) for every step, divided by
   *  --accumulate's K (whose passes' gradients accumulate() then sums). */
  void scale_losses(real init, int64_t growth_interval, real *scale);
  /** Between the gradients and clip_grads of step `step` (every rank calls it; an all-reduce over the world): when
   *  any element of any rank's shards is not finite, the step's updates are skipped (detail::g_skip_updates) and the
   *  scale halved; otherwise the shards are multiplied by 1/scale, as torch.cuda.amp.GradScaler unscales them. */
  void unscale_grads(const std::vector<GradShard> &grads, int64_t step);
  /** After pass `micro` of a step (every rank calls it): with --accumulate K > 1, sums the gradient shards and the
   *  loss (rank 0's scalar; null elsewhere) over the passes, and after the last one leaves their means in place (the
   *  gradients' sums under loss scaling, whose passes were seeded with scale / K). */
  void accumulate(const std::vector<GradShard> &grads, real *loss, int64_t micro);
  /** Ends step `step`: progress, --log-json, a checkpoint when one is due. Returns false when the run must stop now
   *  (a stop signal: the checkpoint is written; call finish(), which exits with kStoppedForResume). */
  bool end_step(int64_t step);
  /** Whether --val-data was given. */
  bool validates() const { return !val_data_.empty(); }
  /** Whether a validation pass follows step `step` (--val-data, --val-every). */
  bool validation_due(int64_t step) const;
  /** The validation file of graph input `name` (`outer` as for data()); fail()s when --val-data gave none. */
  NpyFile val_data(const std::string &name, int64_t outer = 1);
  /** Batches of a validation pass (the samples over the batch, rounded up). */
  int64_t val_batches() const { return (val_samples_ + batch_ - 1) / batch_; }
  /** Reads samples [first, first + count) of validation batch `vb` (from 0), in file order, wrapping around. */
  void read_val_samples(const NpyFile &f, int64_t vb, int64_t first, int64_t count, real *dst);
  void read_val_samples(const NpyFile &f, int64_t vb, int64_t first, int64_t count, int64_t *dst);
  /** Adds this rank's shard of a classifier's scores [n, c, d] (samples [first, first + n) of validation batch `vb`,
   *  labels [n, d], the loss op's class weights or null) to the validation sums. Ranks holding a replica of a shard
   *  call it with `counted` false. */
  void add_validation(const val::LossKind &kind, int64_t vb, int64_t first, int64_t n, int64_t c, int64_t d,
                      const real *scores, const int64_t *labels, const real *weights, bool counted);
  /** After a validation pass (every rank calls it): the sums over the world; rank 0 prints the line. */
  void end_validation(int64_t step);

  /** Runs one step's work, `body` (its passes and updates). On the cpu backend it is called as it is. Under CUDA,
   *  unless --cuda-graphs off (or CLEAVE_CUDA_GRAPHS=0): the first step runs as it comes and shows whether the step
   *  can be a CUDA graph (cuda/graph.cu lists what cannot: host round trips such as --clip-grad-norm, step-numbered
   *  kernels such as Adam's, ranks staging through MPI, --accumulate), the second is captured, and later steps replay
   *  that graph after feeding it their samples; a learning rate that changed makes the step be captured again. */
  void run_step(int64_t step, const std::function<void()> &body);
  /** Samples per step. */
  int64_t batch() const { return batch_; }
  /** Why this run's steps cannot be CUDA graphs whatever they hold ("" when they can): --cuda-graphs off,
   *  --accumulate, --clip-grad-norm or --log-json (host round trips between the passes and the updates). */
  std::string graph_obstacle() const;
  /** Reads samples [first, first + count) of the sample stream as read_samples lays them out, into host memory. */
  void read_samples_to_host(const NpyFile &f, int64_t first, int64_t count, real *host);
  void read_samples_to_host(const NpyFile &f, int64_t first, int64_t count, int64_t *host);

  /** After the loop: --save's file, then finalize() and the exit code (0, or kStoppedForResume). */
  int finish(const std::vector<NamedBuffer> &saved);

 private:
  void write_checkpoint(int64_t step);
  int64_t batch_ = 0, first_step_ = 1, last_step_ = 1, checkpoint_every_ = 1000, keep_ = 2;
  // Passes and data order.
  int64_t accumulate_ = 1, epochs_ = 0, samples_ = 0;
  sched::SampleOrder order_;
  Arena sums_;  // --accumulate: the gradients' and the loss's sums
  template <typename T>
  void read_shuffled(const NpyFile &f, int64_t first, int64_t count, T *dst);
  template <typename T>
  const T *gather_shuffled(const NpyFile &f, int64_t first, int64_t count);
  template <typename T>
  void samples_to_host(const NpyFile &f, int64_t first, int64_t count, T *host);
  bool cuda_graphs_ = true;
  // --shuffle's samples, gathered on the host and copied to the rank's buffer at once (kept between steps).
  std::vector<real> staged_real_;
  std::vector<int64_t> staged_i64_;
  std::string weights_, save_, checkpoint_dir_, resume_, log_json_;
  std::vector<std::pair<std::string, std::string>> data_;
  // Validation.
  std::vector<std::pair<std::string, std::string>> val_data_;
  int64_t val_every_ = 0, val_samples_ = 0;
  val::Sums val_sums_;
  // A validation batch's scores, labels and class weights on the host (kept between batches).
  std::vector<real> val_scores_, val_weights_;
  std::vector<int64_t> val_labels_;
  std::vector<NamedBuffer> state_;
  sched::LrSchedule schedule_;
  // Reporting.
  double clip_norm_ = 0, last_grad_norm_ = -1;
  /** Writes the seed of the next step's passes (loss scaling) into scale_buffer_. */
  void write_scale();
  // Loss scaling (scale_losses): on, the current scale, its buffer, steps in a row without overflow, the growth
  // interval; a resumed checkpoint's scale (0: none) and tracker until scale_losses takes them.
  bool scaling_ = false;
  double scale_ = 0, resumed_scale_ = 0;
  real *scale_buffer_ = nullptr;
  int64_t scale_tracker_ = 0, scale_growth_interval_ = 0, resumed_tracker_ = 0;
  double last_lr_ = 0, started_ = 0, last_progress_ = -1;
  int64_t last_checkpoint_ = 0;
  bool stopped_ = false;
};

namespace detail {
// Step graphs (cuda/graph.cu; the cpu backend has none: cpu/graph.cpp).
/** Runs a step for TrainingRun::run_step. */
void run_step(TrainingRun &run, int64_t step, const std::function<void()> &body);
/** True while a step is being captured: calls that touch host memory record what to do at each replay instead. */
bool graph_capturing();
/** While capturing: `bytes` of samples starting at `first` go to device buffer `dst`; `fill(first, host)` writes
 *  them into host memory. Each replay calls fill with its step's first sample. */
void graph_feed(int64_t first, int64_t bytes, void *dst, std::function<void(int64_t first, void *host)> fill);
/** While capturing: the step's kernels take learning rate `value` = lr(base, step); a replay whose lr differs is
 *  captured again. */
void graph_note_lr(real base, real value);
}  // namespace detail

}  // namespace cleave::rt
