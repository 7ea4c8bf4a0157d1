// The host side of .npy sample reading (each rank reads only the samples it needs) and of raw checkpoints of named
// buffers, shared by the cpu and cuda backends (their io files add only the copies to and from their buffers).
#include "common/host_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

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

/** The value of `'key': value` in an npy header dict, up to the next top-level ',' or '}' (tuples kept whole). */
std::string header_field(const std::string &header, const std::string &key, const std::string &path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(path + ": npy header has no '" + key + "'");
  size_t p = header.find(':', k) + 1;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t e = p;
  int depth = 0;
  while (e < header.size() && !(depth == 0 && (header[e] == ',' || header[e] == '}'))) {
    if (header[e] == '(') ++depth;
    if (header[e] == ')') --depth;
    ++e;
  }
  return header.substr(p, e - p);
}

constexpr char kCheckpointMagic[8] = {'C', 'L', 'E', 'A', 'V', 'E', 'C', '1'};

}  // namespace

NpyFile npy_open(const std::string &path) {
  File file = open_file(path, "rb");
  unsigned char pre[10];
  if (std::fread(pre, 1, 10, file.get()) != 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    fail(path + ": not a .npy file");
  int major = pre[6];
  int64_t header_len = pre[8] | (pre[9] << 8), prefix = 10;
  if (major >= 2) {  // versions 2 and 3 have a 4-byte header length
    unsigned char more[2];
    if (std::fread(more, 1, 2, file.get()) != 2) fail(path + ": truncated npy header");
    header_len |= (static_cast<int64_t>(more[0]) << 16) | (static_cast<int64_t>(more[1]) << 24);
    prefix = 12;
  }
  std::string header(static_cast<size_t>(header_len), '\0');
  if (std::fread(header.data(), 1, header.size(), file.get()) != header.size()) fail(path + ": truncated npy header");
  NpyFile f;
  f.path = path;
  f.data_offset = prefix + header_len;
  std::string descr = header_field(header, "descr", path);
  if (descr == "'<f4'") f = NpyFile{path, 'f', 4, {}, f.data_offset, 1};
  else if (descr == "'<f8'") f = NpyFile{path, 'f', 8, {}, f.data_offset, 1};
  else if (descr == "'<i4'") f = NpyFile{path, 'i', 4, {}, f.data_offset, 1};
  else if (descr == "'<i8'") f = NpyFile{path, 'i', 8, {}, f.data_offset, 1};
  else fail(path + ": unsupported npy dtype " + descr + " (expected <f4, <f8, <i4 or <i8)");
  if (header_field(header, "fortran_order", path) != "False") fail(path + ": fortran-ordered npy is not supported");
  std::string shape = header_field(header, "shape", path);
  for (size_t p = 0; p < shape.size();) {
    if (shape[p] >= '0' && shape[p] <= '9') {
      size_t e = p;
      while (e < shape.size() && shape[e] >= '0' && shape[e] <= '9') ++e;
      f.shape.push_back(std::stoll(shape.substr(p, e - p)));
      p = e;
    } else {
      ++p;
    }
  }
  for (size_t d = 1; d < f.shape.size(); ++d) f.sample_elems *= f.shape[d];
  return f;
}

namespace host {

template <typename T>
void read_samples(const NpyFile &f, int64_t first, int64_t count, T *dst) {
  if (f.shape.empty() || f.shape[0] == 0) fail(f.path + ": no samples to read");
  File file = open_file(f.path, "rb");
  int64_t samples = f.shape[0], row = f.sample_elems * f.elem_size;
  // One seek and one read per run of consecutive samples (a step's shard is one run, two where it wraps around the
  // dataset), in chunks of at most kChunk bytes: a seek per sample made every sample a read system call.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<char> buf;
  for (int64_t i = 0; i < count;) {
    int64_t s = ((first + i) % samples + samples) % samples;  // wrap around the dataset
    int64_t run = std::min({count - i, samples - s, std::max<int64_t>(1, kChunk / std::max<int64_t>(row, 1))});
    buf.resize(static_cast<size_t>(run * row));
    if (std::fseek(file.get(), static_cast<long>(f.data_offset + s * row), SEEK_SET) != 0 ||
        std::fread(buf.data(), 1, buf.size(), file.get()) != buf.size())
      fail(f.path + ": cannot read samples " + std::to_string(s) + ".." + std::to_string(s + run - 1) +
           " (file truncated?)");
    T *out = dst + i * f.sample_elems;
    int64_t n = run * f.sample_elems;
    for (int64_t j = 0; j < n; ++j) {
      const char *src = buf.data() + j * f.elem_size;
      if (f.kind == 'f' && f.elem_size == 4) { float v; std::memcpy(&v, src, 4); out[j] = static_cast<T>(v); }
      else if (f.kind == 'f') { double v; std::memcpy(&v, src, 8); out[j] = static_cast<T>(v); }
      else if (f.elem_size == 4) { int32_t v; std::memcpy(&v, src, 4); out[j] = static_cast<T>(v); }
      else { int64_t v; std::memcpy(&v, src, 8); out[j] = static_cast<T>(v); }
    }
    i += run;
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
