// The host side of .npy sample reading (each rank reads only the samples it needs; the format is
// common/npy_format.h's, shared with the CLI) and of raw checkpoints of named buffers, shared by the cpu and cuda
// backends (their io files add only the copies to and from their buffers).
#include "common/host_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

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

constexpr char kCheckpointMagic[8] = {'C', 'L', 'E', 'A', 'V', 'E', 'C', '1'};

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
    npy::read_samples(h, first, count, dst);
  } catch (const npy::Error &e) {
    fail(e.what());
  }
}

template void read_samples<float>(const NpyFile &, int64_t, int64_t, float *);
template void read_samples<int64_t>(const NpyFile &, int64_t, int64_t, int64_t *);

void checkpoint_save(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &to_host) {
  File file = open_file(path, "wb");
  auto put = [&](const void *p, size_t n) {
    if (std::fwrite(p, 1, n, file.get()) != n) fail("cannot write " + path);
  };
  uint64_t count = buffers.size();
  put(kCheckpointMagic, sizeof kCheckpointMagic);
  put(&count, 8);
  for (const NamedBuffer &b : buffers) {
    uint64_t name_len = b.name.size(), bytes = static_cast<uint64_t>(b.bytes);
    put(&name_len, 8);
    put(b.name.data(), b.name.size());
    put(&bytes, 8);
    std::vector<char> staged(static_cast<size_t>(b.bytes));
    if (b.bytes > 0) to_host(staged.data(), b.ptr, staged.size());
    put(staged.data(), staged.size());
  }
  if (std::fflush(file.get()) != 0) fail("cannot write " + path);
}

void checkpoint_load(const std::string &path, const std::vector<NamedBuffer> &buffers, const CopyFn &from_host) {
  File file = open_file(path, "rb");
  auto get = [&](void *p, size_t n) {
    if (std::fread(p, 1, n, file.get()) != n) fail(path + ": truncated checkpoint");
  };
  char magic[sizeof kCheckpointMagic];
  get(magic, sizeof magic);
  if (std::memcmp(magic, kCheckpointMagic, sizeof magic) != 0) fail(path + ": not a cleave checkpoint");
  uint64_t count = 0;
  get(&count, 8);
  std::vector<bool> loaded(buffers.size(), false);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t name_len = 0, bytes = 0;
    get(&name_len, 8);
    if (name_len > (1u << 20)) fail(path + ": corrupt checkpoint");
    std::string name(name_len, '\0');
    get(name.data(), name_len);
    get(&bytes, 8);
    size_t j = 0;
    while (j < buffers.size() && buffers[j].name != name) ++j;
    if (j == buffers.size()) {  // a buffer this program does not use: skip it
      if (std::fseek(file.get(), static_cast<long>(bytes), SEEK_CUR) != 0) fail(path + ": truncated checkpoint");
      continue;
    }
    if (static_cast<int64_t>(bytes) != buffers[j].bytes)
      fail(path + ": buffer \"" + name + "\" has " + std::to_string(bytes) + " bytes, expected " +
           std::to_string(buffers[j].bytes));
    std::vector<char> staged(static_cast<size_t>(bytes));
    get(staged.data(), staged.size());
    if (bytes > 0) from_host(buffers[j].ptr, staged.data(), staged.size());
    loaded[j] = true;
  }
  for (size_t j = 0; j < buffers.size(); ++j)
    if (!loaded[j]) fail(path + ": checkpoint has no buffer \"" + buffers[j].name + "\"");
}

}  // namespace host
}  // namespace cleave::rt
