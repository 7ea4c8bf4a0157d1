#pragma once
// Conversions between a Tensor's dtype-native bytes and plain value vectors.
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace cleave {

/** Values of `t.data` as doubles (ints and bools converted). Precondition: data holds num_elements values. */
std::vector<double> data_as_doubles(const Tensor &t);
/** Values of `t.data` as int64 (exact for integer dtypes; floats truncated). */
std::vector<int64_t> data_as_ints(const Tensor &t);
/** Encodes values in `dtype`'s native layout (f32 rounds to nearest, ints truncate, bool = value != 0). */
std::vector<uint8_t> encode_doubles(DType dtype, const std::vector<double> &values);
std::vector<uint8_t> encode_ints(DType dtype, const std::vector<int64_t> &values);

}  // namespace cleave
