// Fuzz target: .npy bytes -> the one reader the CLI and the ranks share (runtime/common/npy_format.h): header checks,
// then, for a file it accepts, a few samples read (wrapping around) as float and as int64. npy::Error (one line naming
// the file) is the expected end of a bad file; anything else is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/npy_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = "/tmp/cleave_fuzz_npy_" + std::to_string(::getpid()) + ".npy";
  if (FILE *f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  namespace npy = cleave::rt::npy;
  try {
    npy::Header h = npy::read_header(path);
    // As the ranks and the CLI read: floats into float inputs, integers into integer inputs (feed_problem refuses a
    // float file for an integer input). At most 64 elements per sample are read here: the fuzzer's memory is limited.
    if (h.sample_elems > 0 && h.sample_elems <= 64 && !h.shape.empty() && h.shape[0] > 0) {
      if (npy::feed_problem(h, false).empty()) {
        std::vector<float> f(static_cast<size_t>(3 * h.sample_elems));
        npy::read_samples(h, h.shape[0] - 1, 3, f.data());
      }
      if (npy::feed_problem(h, true).empty()) {
        std::vector<int64_t> i(static_cast<size_t>(2 * h.sample_elems));
        npy::read_samples(h, 0, 2, i.data());
      }
    }
  } catch (const npy::Error &) {
  }
  return 0;
}
