#pragma once
// The one .npy reader: the ranks read their samples with it (host_io.cpp), and the `cleave` CLI checks and reads data
// files with it (tools/cli/npy.cpp), so what `cleave run` and `cleave eval` accept is what the ranks accept. It ships
// inside bundles, so it includes nothing but the standard library, and reports problems by throwing npy::Error.
//
// Accepted: format versions 1-3, a dict header with 'descr' one of '<f4' '<f8' '<i4' '<i8', 'fortran_order': False and
// a shape tuple of non-negative integers whose element count fits int64, followed by at least the data it needs.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cleave::rt::npy {

/** A problem with a .npy file; the message starts with the file's path and is one line. */
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Header {
  std::string path;
  char kind = 'f';              // 'f' (float32/float64) or 'i' (int32/int64)
  int elem_size = 4;            // bytes per element in the file
  std::vector<int64_t> shape;   // dim 0 indexes samples
  int64_t data_offset = 0;      // byte offset of the data in the file
  int64_t sample_elems = 1;     // elements per sample (product of shape[1:])
  std::string descr;            // "<f4", ...
};

/** Opens `path` and checks its header and length (rules above). Throws Error naming the file otherwise: a directory,
 *  an unreadable file, bad magic, a truncated header or data, an unsupported dtype (bool, uint8, big-endian, ...),
 *  fortran order, a shape that is not a tuple of integers. */
Header read_header(const std::string &path);

/** Why `h` cannot feed a tensor of integer elements (`integer`: labels, indices) or floating elements, or "" if it
 *  can: an integer tensor needs an integer file (a float file's 3.5 is not a class). */
std::string feed_problem(const Header &h, bool integer);

/** Reads samples (first + i) mod shape[0] for i in [0, count) into dst (count * sample_elems values), converting to
 *  T (float, double or int64_t). Only those samples are read from disk. Throws Error on a read failure or an empty
 *  array. */
template <typename T>
void read_samples(const Header &h, int64_t first, int64_t count, T *dst);

/** Lays `count` samples read sample-major (src: [count, outer, inner]) out as a tensor whose sample axis has `outer`
 *  elements of the dims before it (dst: [outer, count, inner]). */
template <typename T>
void to_sample_axis(const T *src, int64_t count, int64_t outer, int64_t inner, T *dst) {
  for (int64_t s = 0; s < count; ++s)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) dst[(o * count + s) * inner + i] = src[(s * outer + o) * inner + i];
}

}  // namespace cleave::rt::npy
