#pragma once
// Host-side file formats shared by every backend (not part of the API): .npy sample reading into host memory and the
// raw checkpoint format. A backend whose buffers live elsewhere stages through host memory with its own copies.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cleave/rt.h"

namespace cleave::rt::host {

/** npy_read_samples into host memory (real or int64_t; converts from the file's dtype). */
template <typename T>
void read_samples(const NpyFile &f, int64_t first, int64_t count, T *dst);

/** Copies `bytes` bytes between a backend buffer and host memory. */
using CopyFn = std::function<void(void *dst, const void *src, size_t bytes)>;

/** Set by TrainingRun for the fault-injection test (CLEAVE_TEST_KILL_IN_CHECKPOINT): the next checkpoint_save
 *  kills this process with SIGKILL half-way through its file. */
extern bool g_kill_during_checkpoint;

/** A file written beside `path` and renamed over it once on disk (fsync'ed, then its directory), so `path` is always
 *  either the old file or the whole new one. fail()s naming the file on a write error. */
class DurableFile {
 public:
  explicit DurableFile(std::string path);
  /** An uncommitted file's temporary is removed. */
  ~DurableFile();
  DurableFile(const DurableFile &) = delete;
  DurableFile &operator=(const DurableFile &) = delete;
  void put(const void *p, size_t n);
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

/** checkpoint_save of `buffers`, each read through `to_host` (buffer -> host staging). */
void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &to_host);
/** checkpoint_load into `buffers`, each written through `from_host` (host staging -> buffer). */
void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &from_host);

}  // namespace cleave::rt::host
