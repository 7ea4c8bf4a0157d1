// The host side of .npy sample reading (each rank reads only the samples it needs; the format is
// common/npy_format.h's, shared with the CLI) and of raw checkpoints of named buffers, shared by the cpu and cuda
// backends (their io files add only the copies to and from their buffers).
#include "common/host_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <utility>
#include <vector>

#include "common/checkpoint_format.h"
#include "common/npy_format.h"

namespace cleave::rt {
namespace {

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const std::string &path, const char *mode) {
  File f(std::fopen(path.c_str(), mode));
  if (!f) fail("cannot open " + path + ": " + std::strerror(errno));
  return f;
}

}  // namespace

NpyFile npy_open(const std::string &path) {
  try {
    npy::Header h = npy::read_header(path);
    return NpyFile{h.path, h.kind, h.elem_size, h.shape, h.data_offset, h.sample_elems};
  } catch (const npy::Error &e) {
    fail(e.what());
  }
}

namespace host {

bool g_kill_during_checkpoint = false;

template <typename T>
void read_samples(const NpyFile &f, int64_t first, int64_t count, T *dst) {
  npy::Header h;
  h.path = f.path;
  h.kind = f.kind;
  h.elem_size = f.elem_size;
  h.shape = f.shape;
  h.data_offset = f.data_offset;
  h.sample_elems = f.sample_elems;
  std::string why = npy::feed_problem(h, std::is_integral_v<T>);
  if (!why.empty()) fail(why);
  try {
    if (f.outer == 1) return npy::read_samples(h, first, count, dst);
    std::vector<T> file_order(static_cast<size_t>(count * f.sample_elems));
    npy::read_samples(h, first, count, file_order.data());
    npy::to_sample_axis(file_order.data(), count, f.outer, f.sample_elems / f.outer, dst);
  } catch (const npy::Error &e) {
    fail(e.what());
  }
}

template void read_samples<real>(const NpyFile &, int64_t, int64_t, real *);
template void read_samples<int64_t>(const NpyFile &, int64_t, int64_t, int64_t *);

DurableFile::DurableFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write " + tmp_ + ": " + std::strerror(errno));
}

DurableFile::~DurableFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::remove(tmp_.c_str());
}

void DurableFile::put(const void *p, size_t n) {
  for (const char *c = static_cast<const char *>(p); n > 0;) {
    ssize_t w = ::write(fd_, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot write " + tmp_ + ": " + std::strerror(errno));
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void DurableFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot write " + tmp_ + ": fsync: " + std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot write " + tmp_ + ": " + std::strerror(errno));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno));
  // The rename is durable once the directory is.
  std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &to_host) {
  DurableFile file(path);
  std::string header = ckpt::file_header(buffers.size());
  file.put(header.data(), header.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const NamedBuffer &b = buffers[i];
    ckpt::Layout l{b.name, b.dtype, b.shape, b.begin, b.end, static_cast<uint64_t>(b.bytes)};
    std::string eh = ckpt::entry_header(l);
    file.put(eh.data(), eh.size());
    std::vector<char> staged(static_cast<size_t>(b.bytes));
    if (b.bytes > 0) to_host(staged.data(), b.ptr, staged.size());
    if (g_kill_during_checkpoint && i == buffers.size() / 2) {
      file.put(staged.data(), staged.size() / 2);
      std::raise(SIGKILL);  // the fault-injection test: dies here, half-way through the file
    }
    file.put(staged.data(), staged.size());
  }
  file.commit();
}

void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &from_host) {
  File file = open_file(path, "rb");
  ckpt::Get get = [&](void *p, size_t n) {
    if (std::fread(p, 1, n, file.get()) != n) fail(path + ": truncated checkpoint");
  };
  std::vector<bool> loaded(buffers.size(), false);
  try {
    int version = 0;
    uint64_t count = ckpt::read_file_header(get, path, &version);
    for (uint64_t i = 0; i < count; ++i) {
      ckpt::Layout l = ckpt::read_entry_header(get, version, path);
      size_t j = 0;
      while (j < buffers.size() && buffers[j].name != l.name) ++j;
      if (j == buffers.size()) {  // a buffer this program does not use: skip it
        if (std::fseek(file.get(), static_cast<long>(l.bytes), SEEK_CUR) != 0) fail(path + ": truncated checkpoint");
        continue;
      }
      const NamedBuffer &b = buffers[j];
      if (!l.dtype.empty() && !b.dtype.empty() &&
          (l.dtype != b.dtype || l.shape != b.shape || l.begin != b.begin || l.end != b.end))
        fail(path + ": holds " + l.dtype + " box " + ckpt::box_text(l.begin, l.end) + " of \"" + l.name +
             "\", this rank needs " + b.dtype + " box " + ckpt::box_text(b.begin, b.end) +
             " (a checkpoint of another plan: `cleave run --resume` reshards it)");
      if (static_cast<int64_t>(l.bytes) != b.bytes)
        fail(path + ": buffer \"" + l.name + "\" has " + std::to_string(l.bytes) + " bytes, expected " +
             std::to_string(b.bytes));
      std::vector<char> staged(static_cast<size_t>(l.bytes));
      get(staged.data(), staged.size());
      if (l.bytes > 0) from_host(b.ptr, staged.data(), staged.size());
      loaded[j] = true;
    }
  } catch (const ckpt::Error &e) {
    fail(e.what());
  }
  for (size_t j = 0; j < buffers.size(); ++j)
    if (!loaded[j]) fail(path + ": checkpoint has no buffer \"" + buffers[j].name + "\"");
}

}  // namespace host
}  // namespace cleave::rt
