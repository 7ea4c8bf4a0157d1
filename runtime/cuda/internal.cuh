#pragma once
// Internal to the CUDA backend: library handles, checking macros for cuBLAS/cuDNN/NCCL (CLEAVE_CUDA and
// CLEAVE_LAUNCH live in rt.h, the rank sources use them too), scratch memory, and small fixed-rank shape records
// passed to kernels by value.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt {

void check_cublas(cublasStatus_t code, const char *call, const char *file, int line);
void check_cudnn(cudnnStatus_t code, const char *call, const char *file, int line);
void check_nccl(ncclResult_t code, const char *call, const char *file, int line);
#define CLEAVE_CUBLAS(fn, ...) ::cleave::rt::check_cublas(fn(__VA_ARGS__), #fn, __FILE__, __LINE__)
#define CLEAVE_CUDNN(fn, ...) ::cleave::rt::check_cudnn(fn(__VA_ARGS__), #fn, __FILE__, __LINE__)
#define CLEAVE_NCCL(fn, ...) ::cleave::rt::check_nccl(fn(__VA_ARGS__), #fn, __FILE__, __LINE__)

namespace detail {

cublasHandle_t cublas();
cudnnHandle_t cudnn();
/** The stream NCCL runs on; collectives are ordered after the compute stream's work and before its later work by
 *  events (nccl.cu). */
cudaStream_t comm_stream();

/** Device scratch of at least `bytes`, valid until the next scratch() call: growing it synchronises the compute
 *  stream first, so kernels still reading the old block never see it freed. */
void *scratch(size_t bytes);
/** A second, independent scratch block (for calls that need two). */
void *scratch2(size_t bytes);

/** Waits for the compute stream: before the host reads device results or frees host staging. */
void sync_compute();

/** Starts the watchdog thread (nccl.cu): it reports NCCL's asynchronous errors, and communication that waits longer
 *  than CLEAVE_COMM_TIMEOUT seconds (default 900; 0 = no timeout), naming the rank and the last communication. */
void start_watchdog(int rank, int device);
/** Creates NCCL's world communicator (its id broadcast over MPI) and the communication stream. */
void init_nccl(int rank, int world);
void release_nccl();

/** How GEMMs and convolutions on bf16 or fp16 operands (rt::Operands) multiply, from CLEAVE_LOW_MATH (read once; any
 *  other value stops the rank): native (the default: cuBLAS on bf16/fp16 tensor cores, cuDNN with tensor-op
 *  algorithms, which use TF32 for fp32 data), tf32 (TF32 tensor cores for both), fp32 (as f32 operands: the fp32
 *  arithmetic of --precision fp32). Every choice accumulates in float32 and loses nothing on such operands; the
 *  choice is there to measure them against each other. */
enum class LowMath { native, tf32, fp32 };
LowMath low_math();
/** Whether a call on these operands may use tensor cores: under --precision tf32, or on bf16/fp16 operands in a
 *  mixed-precision program unless CLEAVE_LOW_MATH=fp32. */
bool tensor_math(Operands operands);

// Per-op choice between cuDNN and the CUDA kernels for pooling and batch norm (pool.cu and norm.cu say why each
// case goes where it goes). Host only and free of CUDA calls: tests/gpu/cudnn_paths checks them without a GPU.
/** False when CLEAVE_CUDNN_POOL_NORM=0: every pooling and batch-norm call then runs the kernels (tests compare both
 *  paths with the CPU backend). Read once. */
bool cudnn_pool_norm_enabled();
bool cudnn_takes_max_pool_forward(const PoolShape &s, bool indices);
/** Average pooling, forward and backward. */
bool cudnn_takes_avg_pool(const PoolShape &s);
/** Global average pooling, forward and backward; divisor as global_avg_pool_forward's. */
bool cudnn_takes_global_avg_pool(int64_t nc, int64_t spatial, int64_t divisor);
bool cudnn_takes_batch_norm_forward(int64_t n, int64_t c, int64_t d, double eps);
/** dx: dX is wanted; saved: the forward's saved mean and inverse std are given. */
bool cudnn_takes_batch_norm_backward(int64_t n, int64_t c, int64_t d, bool dx, bool saved);

// Step graphs (graph.cu).
/** While the probe step runs: `why` names something of the step a CUDA graph cannot hold, so graphs stay off. While
 *  capturing it fail()s (the probe step would have found it). */
void graph_unsafe(const std::string &why);
/** While capturing: records an error-flag check (its message) for after each replay and returns true. */
bool graph_defer_check(const std::string &msg);
/** While capturing: records the loss buffer log_loss prints after each replay and returns true. */
bool graph_defer_loss(const float *loss);
/** Whether a step is being captured or a captured step exists: scratch blocks must then outlive their growth. */
bool graph_holds_scratch();
/** Frees the graph and its pinned sample buffers (finalize). */
void release_graph();
// Communication under graphs (nccl.cu).
/** Whether the ranks communicate through MPI on host copies (ranks sharing a GPU): such steps cannot be graphs. */
bool comm_staged();
/** Around a capture: the watchdog leaves the events that the capture records alone, and after it they are recorded
 *  again outside the capture so that it can query them. */
void nccl_capture(bool begin);
/** After a replay is launched: the watchdog waits for the replay's communication as for a collective's. */
void nccl_graph_launched();

/** Host-side checks shared with the CPU backend's messages. */
int64_t product(const Dims &d);

constexpr int kMaxRank = 8;
/** A shape or stride list of at most kMaxRank entries, passed to kernels by value. */
struct Small {
  int64_t v[kMaxRank] = {};
  int n = 0;
  __host__ __device__ int64_t operator[](int i) const { return v[i]; }
};
/** Copies `d` into a Small; fail()s naming `what` if it has more than kMaxRank entries. */
Small small(const Dims &d, const char *what);

/** A device flag for errors found inside kernels (bad labels or indices): kernels set it, the host checks it. */
int *error_flag();
/** Copies the flag to the host (synchronising) and fail()s with `msg` if a kernel set it. */
void check_error_flag(const std::string &msg);

// Block-wide sums in double for one-block-per-row reductions (blockDim.x == kThreads).
__device__ inline double block_sum(double v, double *shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < (static_cast<int>(blockDim.x) + 31) / 32; ++w) t += shared[w];
  __syncthreads();
  if (threadIdx.x == 0) shared[0] = t;
  __syncthreads();
  return shared[0];
}

/** The sum of v over a warp, in every lane (a butterfly: each lane adds the same pairs, so all hold the same bits). */
__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums over the rows of contiguous columns ([rows, cols] -> [cols]: bias gradients, layer norm's dScale and dBias),
// in two passes so that enough threads run and the order of the additions is fixed. The first pass runs blocks of
// kColTile columns by kRowLanes row lanes: block (x, y) sums chunk y of the rows for its columns, each lane every
// kRowLanes-th row (a warp reads consecutive columns of a row), and adds its lanes in order into one partial sum per
// chunk and column, in double. The second (sum_column_partials) adds each column's chunks in order.
constexpr int kColTile = 32, kRowLanes = 8;
struct ColumnChunks {
  int64_t col_blocks = 1, chunks = 1, rows = 0;  // rows: a chunk's
};
/** About 2048 blocks, in at most 256 chunks of at least 8 rows (so the second pass adds few partial sums a column). */
ColumnChunks column_chunks(int64_t cols, int64_t rows);
/** The second pass: y[k] = (sum over chunks c of partial[c * cols + k]) / divisor, for k in [0, cols). */
void sum_column_partials(int64_t cols, int64_t chunks, const double *partial, float *y, double divisor);

/** Blocks for a grid of one block per row, capped (kernels loop over the rest). */
inline unsigned rows_grid(int64_t rows) { return static_cast<unsigned>(rows < 1 ? 1 : rows > 65535 ? 65535 : rows); }

}  // namespace detail
}  // namespace cleave::rt
