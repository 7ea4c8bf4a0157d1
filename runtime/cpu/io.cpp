// .npy samples and checkpoints on the cpu backend: its buffers are host memory (common/host_io.cpp does the work).
#include <cstring>

#include "cleave/rt.h"
#include "common/host_io.h"

namespace cleave::rt {

void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, real *dst) {
  host::read_samples(f, first, count, dst);
}

void npy_read_samples(const NpyFile &f, int64_t first, int64_t count, int64_t *dst) {
  host::read_samples(f, first, count, dst);
}

void copy_to_host(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void copy_from_host(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers) {
  host::checkpoint_save(path, buffers, [](void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); });
}

void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers) {
  host::checkpoint_load(path, buffers, [](void *dst, const void *src, size_t n) { std::memcpy(dst, src, n); });
}

}  // namespace cleave::rt
