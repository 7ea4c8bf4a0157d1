// .npy samples and checkpoints for device buffers: common/host_io.cpp reads and writes the files (same formats and
// messages as the cpu backend); this file stages through host memory.
#include <vector>

#include "common/host_io.h"
#include "cuda/internal.cuh"

namespace cleave::rt {
namespace {

/** Reads into host memory, then copies to the device buffer `dst`. */
template <typename T>
void read_samples(const NpyFile &f, int64_t first, int64_t count, T *dst) {
  std::vector<T> staged(static_cast<size_t>(count * f.sample_elems));
  host::read_samples(f, first, count, staged.data());
  if (staged.empty()) return;
  // The compute stream may still read dst's previous contents; the copy is ordered after it and the host buffer
  // lives until it is done.
  CLEAVE_CUDA(cudaMemcpyAsync, dst, staged.data(), staged.size() * sizeof(T), cudaMemcpyHostToDevice,
              compute_stream());
  detail::sync_compute();
}

}  // namespace

void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, float *dst) { read_samples(f, first, count, dst); }

void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, int64_t *dst) {
  read_samples(f, first, count, dst);
}

void copy_from_host(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0) return;
  // The compute stream may still read dst's previous contents: the copy is ordered after it.
  CLEAVE_CUDA(cudaMemcpyAsync, dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, compute_stream());
  detail::sync_compute();
}

void copy_to_host(void *dst, const void *src, int64_t bytes) {
  if (bytes <= 0) return;
  detail::sync_compute();  // src's last writes
  CLEAVE_CUDA(cudaMemcpy, dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost);
}

void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers) {
  detail::sync_compute();  // the buffers' last writes
  host::checkpoint_save(path, buffers, [](void *dst, const void *src, size_t n) {
    CLEAVE_CUDA(cudaMemcpy, dst, src, n, cudaMemcpyDeviceToHost);
  });
}

void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers) {
  host::checkpoint_load(path, buffers, [](void *dst, const void *src, size_t n) {
    CLEAVE_CUDA(cudaMemcpyAsync, dst, src, n, cudaMemcpyHostToDevice, compute_stream());
    detail::sync_compute();  // the staging buffer is freed when the copy returns
  });
}

}  // namespace cleave::rt
