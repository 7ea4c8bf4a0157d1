#pragma once
// Data files for `cleave eval`, `test` and `run`, read with the runtime's own .npy reader
// (runtime/common/npy_format.h), so the CLI accepts exactly the files the ranks accept.
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

struct NpyArray {
  std::vector<int64_t> shape;
  /** Values converted to double (exact for the integer ranges datasets use). */
  std::vector<double> data;
  std::string descr;  // e.g. "<f4"
  bool integer = false;  // an int32/int64 file
};

/** The header of `path`, checked as the ranks check it; the data is not read. Throws UserError naming the file. */
NpyArray read_npy_header(const std::string &path);

/** The whole array. Throws UserError naming the file on a missing, truncated or unsupported file. */
NpyArray read_npy(const std::string &path);

/** Throws UserError if `a` (from `path`) cannot feed a tensor of integer (`integer`) or float elements, with the
 *  ranks' message: an integer tensor (labels, indices) needs an integer file. */
void check_npy_feeds(const NpyArray &a, const std::string &path, bool integer);

}  // namespace cleave
