#pragma once
// Reads NumPy .npy files (format 1.x/2.x/3.x, C order, little-endian bool/int32/int64/float32/float64).
#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

struct NpyArray {
  std::vector<int64_t> shape;
  /** Values converted to double (exact for the integer ranges datasets use). */
  std::vector<double> data;
  std::string descr;  // e.g. "<f4"
};

/** Throws UserError naming the file on a missing, truncated or unsupported file. */
NpyArray read_npy(const std::string &path);

}  // namespace cleave
