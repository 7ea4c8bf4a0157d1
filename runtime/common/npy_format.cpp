#include "npy_format.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace cleave::rt::npy {
namespace {

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

[[noreturn]] void fail(const std::string &path, const std::string &what) { throw Error(path + ": " + what); }

/** At most the first 40 characters of `s`, with anything unprintable as '?', for quoting a header in a message. */
std::string excerpt(const std::string &s) {
  std::string r;
  for (size_t i = 0; i < s.size() && i < 40; ++i) r += s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  return s.size() > 40 ? r + "..." : r;
}

File open_regular(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open data file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, std::string("cannot open data file: ") + std::strerror(errno));
  return f;
}

/** The value of `'key': value` in the header dict, up to the next top-level ',' or '}' (tuples kept whole). */
std::string header_field(const std::string &header, const std::string &key, const std::string &path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(path, "not a valid .npy file (no '" + key + "' in its header)");
  size_t p = header.find(':', k + key.size() + 2);
  if (p == std::string::npos) fail(path, "not a valid .npy file (no value for '" + key + "')");
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  size_t e = p;
  int depth = 0;
  while (e < header.size() && !(depth == 0 && (header[e] == ',' || header[e] == '}'))) {
    if (header[e] == '(') ++depth;
    if (header[e] == ')') --depth;
    ++e;
  }
  std::string v = header.substr(p, e - p);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

/** "(2, 3)", "(5,)", "()": a tuple of non-negative integers. */
std::vector<int64_t> parse_shape(const std::string &text, const std::string &path) {
  auto bad = [&] { fail(path, "bad shape " + excerpt(text) + " in the .npy header (expected a tuple of integers)"); };
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') bad();
  std::vector<int64_t> shape;
  size_t p = 1, end = text.size() - 1;
  auto skip = [&] {
    while (p < end && text[p] == ' ') ++p;
  };
  skip();
  while (p < end) {
    size_t start = p;
    int64_t v = 0;
    while (p < end && text[p] >= '0' && text[p] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text[p] - '0', &v))
        fail(path, "shape " + excerpt(text) + " in the .npy header: a dimension overflows int64");
      ++p;
    }
    if (p == start) bad();
    shape.push_back(v);
    skip();
    if (p < end) {
      if (text[p] != ',') bad();
      ++p;
      skip();
    }
  }
  return shape;
}

std::string shape_text(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

Header read_header(const std::string &path) {
  File file = open_regular(path);
  unsigned char pre[10];
  if (std::fread(pre, 1, 10, file.get()) != 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
    fail(path, "not a .npy file (bad magic)");
  int major = pre[6];
  if (major < 1 || major > 3) fail(path, "unsupported .npy format version " + std::to_string(major));
  int64_t header_len = pre[8] | (pre[9] << 8), prefix = 10;
  if (major >= 2) {  // versions 2 and 3 have a 4-byte header length
    unsigned char more[2];
    if (std::fread(more, 1, 2, file.get()) != 2) fail(path, "truncated .npy header");
    header_len |= (static_cast<int64_t>(more[0]) << 16) | (static_cast<int64_t>(more[1]) << 24);
    prefix = 12;
  }
  struct stat st {};
  if (::fstat(fileno(file.get()), &st) != 0) fail(path, std::string("cannot read: ") + std::strerror(errno));
  int64_t file_size = st.st_size;
  if (prefix + header_len > file_size) fail(path, "truncated .npy header");
  std::string header(static_cast<size_t>(header_len), '\0');
  if (std::fread(header.data(), 1, header.size(), file.get()) != header.size()) fail(path, "truncated .npy header");
  size_t open = header.find_first_not_of(' ');
  if (open == std::string::npos || header[open] != '{') fail(path, "not a valid .npy file (its header is not a dict)");

  Header h;
  h.path = path;
  h.data_offset = prefix + header_len;
  std::string descr = header_field(header, "descr", path);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"') || descr.back() != descr.front())
    fail(path, "bad dtype " + excerpt(descr) + " in the .npy header");
  h.descr = descr.substr(1, descr.size() - 2);
  if (h.descr == "<f4") h.kind = 'f', h.elem_size = 4;
  else if (h.descr == "<f8") h.kind = 'f', h.elem_size = 8;
  else if (h.descr == "<i4") h.kind = 'i', h.elem_size = 4;
  else if (h.descr == "<i8") h.kind = 'i', h.elem_size = 8;
  else
    fail(path, "unsupported .npy dtype '" + excerpt(h.descr) +
                   "' (cleave reads float32, float64, int32 and int64: convert with a.astype(np.float32) or "
                   "a.astype(np.int64))");
  std::string fortran = header_field(header, "fortran_order", path);
  if (fortran == "True")
    fail(path, "fortran_order=True arrays are not supported (save np.ascontiguousarray(a) instead)");
  if (fortran != "False") fail(path, "bad fortran_order " + excerpt(fortran) + " in the .npy header");
  h.shape = parse_shape(header_field(header, "shape", path), path);
  int64_t n = 1;
  for (size_t d = 0; d < h.shape.size(); ++d) {
    if (__builtin_mul_overflow(n, h.shape[d], &n))
      fail(path, "shape " + shape_text(h.shape) + " has more elements than int64 holds");
    if (d > 0 && __builtin_mul_overflow(h.sample_elems, h.shape[d], &h.sample_elems))
      fail(path, "shape " + shape_text(h.shape) + " has more elements per sample than int64 holds");
  }
  int64_t bytes = 0, end = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(h.elem_size), &bytes) ||
      __builtin_add_overflow(bytes, h.data_offset, &end))
    fail(path, "shape " + shape_text(h.shape) + " is too large");
  if (end > file_size)
    fail(path, "truncated .npy data (" + std::to_string(file_size - h.data_offset) + " bytes, shape " +
                   shape_text(h.shape) + " needs " + std::to_string(bytes) + ")");
  return h;
}

std::string feed_problem(const Header &h, bool integer) {
  if (integer && h.kind != 'i')
    return h.path + ": labels and indices must be an integer array, got dtype '" + h.descr + "'";
  return "";
}

template <typename T>
void read_samples(const Header &h, int64_t first, int64_t count, T *dst) {
  if (h.shape.empty() || h.shape[0] == 0) fail(h.path, "no samples to read");
  File file = open_regular(h.path);
  int64_t samples = h.shape[0], row = h.sample_elems * h.elem_size;
  // One seek and one read per run of consecutive samples (a step's shard is one run, two where it wraps around the
  // dataset), in chunks of at most kChunk bytes: a seek per sample made every sample a read system call.
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<char> buf;
  for (int64_t i = 0; i < count;) {
    int64_t s = ((first + i) % samples + samples) % samples;  // wrap around the dataset
    int64_t run = std::min({count - i, samples - s, std::max<int64_t>(1, kChunk / std::max<int64_t>(row, 1))});
    buf.resize(static_cast<size_t>(run * row));
    if (std::fseek(file.get(), static_cast<long>(h.data_offset + s * row), SEEK_SET) != 0 ||
        std::fread(buf.data(), 1, buf.size(), file.get()) != buf.size())
      fail(h.path, "cannot read samples " + std::to_string(s) + ".." + std::to_string(s + run - 1) +
                       " (file truncated?)");
    T *out = dst + i * h.sample_elems;
    int64_t n = run * h.sample_elems;
    for (int64_t j = 0; j < n; ++j) {
      const char *src = buf.data() + j * h.elem_size;
      if (h.kind == 'f' && h.elem_size == 4) { float v; std::memcpy(&v, src, 4); out[j] = static_cast<T>(v); }
      else if (h.kind == 'f') { double v; std::memcpy(&v, src, 8); out[j] = static_cast<T>(v); }
      else if (h.elem_size == 4) { int32_t v; std::memcpy(&v, src, 4); out[j] = static_cast<T>(v); }
      else { int64_t v; std::memcpy(&v, src, 8); out[j] = static_cast<T>(v); }
    }
    i += run;
  }
}

template void read_samples<float>(const Header &, int64_t, int64_t, float *);
template void read_samples<double>(const Header &, int64_t, int64_t, double *);
template void read_samples<int64_t>(const Header &, int64_t, int64_t, int64_t *);

}  // namespace cleave::rt::npy
