// Process context from the launch environment (rank, local rank -> device), error reporting that aborts the whole
// job, the checks behind the CLEAVE_* macros, logging, the device arena, scratch memory and library handles.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/run_status.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

Context g_context;
bool g_initialised = false;
cudaStream_t g_compute = nullptr;
cublasHandle_t g_cublas = nullptr;
cudnnHandle_t g_cudnn = nullptr;
void *g_cublas_workspace = nullptr;
constexpr size_t kCublasWorkspace = size_t{32} << 20;  // what cuBLAS asks for on Hopper

struct ScratchBlock {
  void *ptr = nullptr;
  size_t bytes = 0;
};
ScratchBlock g_scratch[2];
int *g_error_flag = nullptr;

std::vector<void *> g_retired;  // scratch blocks outgrown once a step graph exists: it may still use them

void *grow(ScratchBlock &b, size_t bytes) {
  if (bytes <= b.bytes) return b.ptr;
  // A captured step keeps the blocks it was captured with (a later validation pass may need bigger ones).
  if (detail::graph_holds_scratch()) {
    g_retired.push_back(b.ptr);
  } else {
    detail::sync_compute();  // kernels queued before may still read the old block
    if (b.ptr) CLEAVE_CUDA(cudaFree, b.ptr);
  }
  b.bytes = bytes + bytes / 4;
  CLEAVE_CUDA(cudaMalloc, &b.ptr, b.bytes);
  return b.ptr;
}

}  // namespace

const Context &init(int *argc, char ***argv) {
  if (g_initialised) return g_context;
  host::init_process(argc, argv, g_context);
  // fp32 GEMMs and convolutions without TF32 (cuBLAS and cuDNN read this when they start), so GPU runs equal CPU
  // runs within fp32 tolerance, unless the bundle was compiled with --precision tf32; a user's own setting wins.
  // Mixed precision leaves TF32 allowed: its calls on bf16 or fp16 operands may use it (losing nothing), and its
  // other cuDNN calls accept FMA algorithms only (conv.cu), its other cuBLAS calls run in the handle's pedantic math.
  bool tf32 = math() == Math::tf32;
  if (math() == Math::fp32) setenv("NVIDIA_TF32_OVERRIDE", "0", 0);
  (void)detail::low_math();  // a bad CLEAVE_LOW_MATH stops the rank at start-up
  int devices = 0;
  CLEAVE_CUDA(cudaGetDeviceCount, &devices);
  int local = host::local_rank(g_context.rank);
  if (devices < 1) fail("no CUDA device is visible");
  // A launcher that binds one GPU per task (Slurm --gpus-per-task=1, launch/slurm.sbatch) shows each rank only its
  // own: device 0. Otherwise the node's GPUs are shared out by local rank, round robin when ranks outnumber them
  // (the ranks then communicate through host memory: detail::init_nccl).
  CLEAVE_CUDA(cudaSetDevice, local % devices);
  CLEAVE_CUDA(cudaStreamCreateWithFlags, &g_compute, cudaStreamNonBlocking);
  CLEAVE_CUBLAS(cublasCreate, &g_cublas);
  CLEAVE_CUBLAS(cublasSetStream, g_cublas, g_compute);
  // Full fp32 GEMMs (no TF32), so GPU runs equal CPU runs within fp32 tolerance; or TF32 tensor cores.
  CLEAVE_CUBLAS(cublasSetMathMode, g_cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
  if (tf32) log_info("--precision tf32: cuBLAS and cuDNN may use TF32 tensor cores");
  // A workspace of our own: cuBLAS then allocates nothing while a step is captured as a CUDA graph (graph.cu).
  CLEAVE_CUDA(cudaMalloc, &g_cublas_workspace, kCublasWorkspace);
  CLEAVE_CUBLAS(cublasSetWorkspace, g_cublas, g_cublas_workspace, kCublasWorkspace);
  CLEAVE_CUDNN(cudnnCreate, &g_cudnn);
  CLEAVE_CUDNN(cudnnSetStream, g_cudnn, g_compute);
  CLEAVE_CUDA(cudaMalloc, &g_error_flag, sizeof(int));
  CLEAVE_CUDA(cudaMemsetAsync, g_error_flag, 0, sizeof(int), g_compute);
  CLEAVE_CUDA(cudaStreamSynchronize, g_compute);
  detail::init_nccl(g_context.rank, g_context.world);
  detail::start_watchdog(g_context.rank, local % devices);
  g_initialised = true;
  return g_context;
}

const Context &context() {
  if (!g_initialised) fail("the runtime is used before cleave::rt::init");
  return g_context;
}

void finalize() {
  if (!g_initialised) return;
  detail::sync_compute();
  host::flush_losses();
  host::status_finished();
  detail::release_graph();
  detail::release_nccl();
  for (auto &b : g_scratch)
    if (b.ptr) CLEAVE_CUDA(cudaFree, b.ptr);
  for (void *p : g_retired)
    if (p) CLEAVE_CUDA(cudaFree, p);
  g_retired.clear();
  CLEAVE_CUDA(cudaFree, g_cublas_workspace);
  CLEAVE_CUDA(cudaFree, g_error_flag);
  CLEAVE_CUDNN(cudnnDestroy, g_cudnn);
  CLEAVE_CUBLAS(cublasDestroy, g_cublas);
  CLEAVE_CUDA(cudaStreamDestroy, g_compute);
  g_compute = nullptr;
  g_cudnn = nullptr;
  g_cublas = nullptr;
  MPI_Finalize();
  g_initialised = false;
}

void check_cuda(cudaError_t code, const char *call, const char *file, int line) {
  if (code != cudaSuccess) host::report(call, file, line, cudaGetErrorString(code));
}

void check_cublas(cublasStatus_t code, const char *call, const char *file, int line) {
  if (code != CUBLAS_STATUS_SUCCESS) host::report(call, file, line, cublasGetStatusString(code));
}

void check_cudnn(cudnnStatus_t code, const char *call, const char *file, int line) {
  if (code != CUDNN_STATUS_SUCCESS) host::report(call, file, line, cudnnGetErrorString(code));
}

void check_nccl(ncclResult_t code, const char *call, const char *file, int line) {
  if (code != ncclSuccess && code != ncclInProgress) host::report(call, file, line, ncclGetErrorString(code));
}

cudaStream_t compute_stream() {
  if (!g_compute) fail("the CUDA runtime is used before cleave::rt::init");
  return g_compute;
}

void log_loss(int64_t step, const float *loss) {
  if (detail::graph_defer_loss(loss)) return;  // printed after each replay of the captured step
  if (host::message_rank() > 0) return;
  float value = 0;
  CLEAVE_CUDA(cudaMemcpyAsync, &value, loss, sizeof value, cudaMemcpyDeviceToHost, compute_stream());
  detail::sync_compute();
  host::print_loss(step, static_cast<double>(value));
}

Arena::Arena(size_t bytes, size_t align) : size_(bytes) {
  // cudaMalloc aligns to at least 256 bytes.
  if (align < alignof(std::max_align_t) || (align & (align - 1)) != 0 || align > 256)
    fail("arena alignment " + std::to_string(align) + " is not a power of two in [max_align_t, 256]");
  CLEAVE_CUDA(cudaMalloc, &base_, bytes == 0 ? 256 : bytes);
  // On the compute stream (non-blocking: the legacy default stream would not order before it).
  if (bytes > 0) CLEAVE_CUDA(cudaMemsetAsync, base_, 0, bytes, compute_stream());
}

Arena::~Arena() {
  if (base_) CLEAVE_CUDA(cudaFree, base_);
}

Arena::Arena(Arena &&other) noexcept : base_(other.base_), size_(other.size_) {
  other.base_ = nullptr;
  other.size_ = 0;
}

Arena &Arena::operator=(Arena &&other) noexcept {
  if (this != &other) {
    if (base_) CLEAVE_CUDA(cudaFree, base_);
    base_ = other.base_;
    size_ = other.size_;
    other.base_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void *Arena::at(size_t offset, size_t bytes) const {
  if (offset + bytes > size_)
    fail("arena access [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) + ") beyond its " +
         std::to_string(size_) + " bytes");
  return static_cast<char *>(base_) + offset;
}

namespace detail {

cublasHandle_t cublas() {
  if (!g_cublas) fail("cuBLAS is used before cleave::rt::init");
  return g_cublas;
}

cudnnHandle_t cudnn() {
  if (!g_cudnn) fail("cuDNN is used before cleave::rt::init");
  return g_cudnn;
}

LowMath low_math() {
  static const LowMath m = [] {
    const char *env = std::getenv("CLEAVE_LOW_MATH");
    std::string v = env ? env : "native";
    if (v == "native") return LowMath::native;
    if (v == "tf32") return LowMath::tf32;
    if (v == "fp32") return LowMath::fp32;
    fail("CLEAVE_LOW_MATH is \"" + v + "\"; expected native, tf32 or fp32");
  }();
  return m;
}

bool tensor_math(Operands operands) {
  if (math() == Math::tf32) return true;
  return math() == Math::mixed && operands != Operands::f32 && low_math() != LowMath::fp32;
}

void *scratch(size_t bytes) { return grow(g_scratch[0], bytes); }
void *scratch2(size_t bytes) { return grow(g_scratch[1], bytes); }

void sync_compute() {
  if (graph_capturing()) fail("internal: a host synchronisation while capturing a CUDA graph (run with --cuda-graphs off)");
  CLEAVE_CUDA(cudaStreamSynchronize, compute_stream());
}

int64_t product(const Dims &d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

Small small(const Dims &d, const char *what) {
  if (d.size() > static_cast<size_t>(kMaxRank))
    fail(std::string(what) + ": rank " + std::to_string(d.size()) + " exceeds the CUDA backend's " +
         std::to_string(kMaxRank));
  Small s;
  s.n = static_cast<int>(d.size());
  for (size_t i = 0; i < d.size(); ++i) s.v[i] = d[i];
  return s;
}

int *error_flag() {
  if (!g_error_flag) fail("the CUDA runtime is used before cleave::rt::init");
  return g_error_flag;
}

void check_error_flag(const std::string &msg) {
  if (graph_defer_check(msg)) return;  // checked after each replay of the captured step
  int flag = 0;
  CLEAVE_CUDA(cudaMemcpyAsync, &flag, error_flag(), sizeof flag, cudaMemcpyDeviceToHost, compute_stream());
  sync_compute();
  if (flag) fail(msg);
}

}  // namespace detail
}  // namespace cleave::rt
