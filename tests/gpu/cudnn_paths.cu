// Which path the CUDA backend takes for each pooling and batch-norm case of pool_norm_cases.h: cuDNN or its kernels,
// as runtime/cuda/pool.cu and norm.cu choose it (their cudnn_takes_* predicates, the functions the ops call). Host
// only: no rt::init, no CUDA call, so it runs without a GPU; kernel_cases compares the results with the CPU backend
// where one exists. Prints one line per case and op; exits 1 if a case takes another path than the table says,
// including with CLEAVE_CUDNN_POOL_NORM=0, where every case must take the kernels.
// Usage: cudnn_paths            (the table's paths)
//        cudnn_paths --kernels  (expects CLEAVE_CUDNN_POOL_NORM=0 in the environment: kernels everywhere)
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda/internal.cuh"
#include "pool_norm_cases.h"

namespace rt = cleave::rt;

namespace {

int g_wrong = 0;

void expect(const std::string &what, bool cudnn, bool want) {
  std::printf("%-40s %-6s%s\n", what.c_str(), cudnn ? "cudnn" : "kernel", cudnn == want ? "" : "  WRONG");
  g_wrong += cudnn != want;
}

}  // namespace

int main(int argc, char **argv) {
  bool kernels_only = argc == 2 && std::strcmp(argv[1], "--kernels") == 0;
  if (argc > 2 || (argc == 2 && !kernels_only)) {
    std::fprintf(stderr, "error: usage: cudnn_paths [--kernels]\n");
    return 2;
  }
  if (kernels_only == rt::detail::cudnn_pool_norm_enabled()) {
    std::fprintf(stderr, "error: CLEAVE_CUDNN_POOL_NORM=0 must be set exactly when --kernels is given\n");
    return 2;
  }
  auto want = [&](bool table) { return table && !kernels_only; };
  for (const auto &c : rt::cases::pool_cases()) {
    if (c.kind == rt::cases::Pool::max) {
      expect(c.name + " max_pool_forward", rt::detail::cudnn_takes_max_pool_forward(c.shape, c.indices),
             want(c.cudnn_fwd));
      // max_pool_backward has no cuDNN path (pool.cu: no documented tie rule); the table must agree.
      expect(c.name + " max_pool_backward", false, want(c.cudnn_bwd));
    } else {
      bool cudnn = rt::detail::cudnn_takes_avg_pool(c.shape);
      expect(c.name + " avg_pool_forward", cudnn, want(c.cudnn_fwd));
      expect(c.name + " avg_pool_backward", cudnn, want(c.cudnn_bwd));
    }
  }
  for (const auto &g : rt::cases::global_cases())
    expect(g.name + " global_avg_pool", rt::detail::cudnn_takes_global_avg_pool(g.nc, g.spatial, g.divisor),
           want(g.cudnn));
  for (const auto &k : rt::cases::norm_cases()) {
    expect(k.name + " batch_norm_train_forward", rt::detail::cudnn_takes_batch_norm_forward(k.n, k.c, k.d, k.eps),
           want(k.cudnn_fwd));
    if (k.saved)
      expect(k.name + " batch_norm_backward",
             rt::detail::cudnn_takes_batch_norm_backward(k.n, k.c, k.d, k.want_dx, true), want(k.cudnn_bwd));
  }
  // Shapes past cuDNN's int descriptors take the kernels.
  expect("bn_beyond_int batch_norm_train_forward",
         rt::detail::cudnn_takes_batch_norm_forward(1 << 16, 64, 1 << 16, 1e-5), false);
  expect("global_avg_beyond_int global_avg_pool", rt::detail::cudnn_takes_global_avg_pool(1 << 20, 1 << 12, 0),
         false);
  if (g_wrong) {
    std::printf("FAIL: %d cases take another path\n", g_wrong);
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
