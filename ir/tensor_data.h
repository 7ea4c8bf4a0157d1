#pragma once
// Conversions between a Tensor's dtype-native bytes and plain value vectors, and reading values that a tensor only
// references (Tensor::external) when a stage needs them.
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace cleave {

/** Values of `t.data` as doubles (ints and bools converted). Precondition: data holds num_elements values. */
std::vector<double> data_as_doubles(const Tensor &t);
/** Values of `t.data` as int64 (exact for integer dtypes; floats truncated). */
std::vector<int64_t> data_as_ints(const Tensor &t);
/** Encodes values in `dtype`'s native layout: floats round to nearest even (f16/bf16 via ir/float16.h), integers
 *  truncate toward zero and wrap modulo 2^bits, bool = value != 0. */
std::vector<uint8_t> encode_doubles(DType dtype, const std::vector<double> &values);
std::vector<uint8_t> encode_ints(DType dtype, const std::vector<int64_t> &values);

/** The dtype-native bytes of t's values: t.data if set, else its external data read from disk (one tensor at a time,
 *  so a caller that writes shards never holds more than one tensor). Throws UserError naming tensor and file if the
 *  file is missing, not a regular file, reached through a symlink, or too short. Empty for a tensor without either. */
std::vector<uint8_t> tensor_bytes(const Tensor &t);

/** Reads every referenced tensor's values into `data` and drops the references. */
void load_external_data(Graph &g);

/** Checks that every external data file the graph references exists and is long enough, without reading it. Throws
 *  one UserError listing each missing or short file with the bytes it must hold (e.g. `external data missing:
 *  /m/w.data (needs 65536 bytes; does not exist)`). */
void check_external_data(const Graph &g);

}  // namespace cleave
