#include "ir/tensor_data.h"

#include <cstring>

#include "ir/error.h"

namespace cleave {
namespace {

template <typename Out, typename In>
void read_all(const std::vector<uint8_t> &bytes, std::vector<Out> &out) {
  size_t n = bytes.size() / sizeof(In);
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    In v;
    std::memcpy(&v, bytes.data() + i * sizeof(In), sizeof(In));
    out[i] = static_cast<Out>(v);
  }
}

template <typename Out>
std::vector<Out> decode(const Tensor &t) {
  CLEAVE_CHECK(t.data.size() == static_cast<size_t>(num_elements(t.shape) * dtype_size(t.dtype)),
               "tensor \"", t.name, "\" has ", t.data.size(), " data bytes for shape ", shape_str(t.shape));
  std::vector<Out> out;
  switch (t.dtype) {
    case DType::f32: read_all<Out, float>(t.data, out); break;
    case DType::f64: read_all<Out, double>(t.data, out); break;
    case DType::i64: read_all<Out, int64_t>(t.data, out); break;
    case DType::i32: read_all<Out, int32_t>(t.data, out); break;
    case DType::boolean: read_all<Out, uint8_t>(t.data, out); break;
  }
  return out;
}

template <typename Store, typename In>
void write_all(const std::vector<In> &values, std::vector<uint8_t> &bytes) {
  bytes.resize(values.size() * sizeof(Store));
  for (size_t i = 0; i < values.size(); ++i) {
    Store v = static_cast<Store>(values[i]);
    std::memcpy(bytes.data() + i * sizeof(Store), &v, sizeof(Store));
  }
}

template <typename In>
std::vector<uint8_t> encode(DType dtype, const std::vector<In> &values) {
  std::vector<uint8_t> bytes;
  switch (dtype) {
    case DType::f32: write_all<float>(values, bytes); break;
    case DType::f64: write_all<double>(values, bytes); break;
    case DType::i64: write_all<int64_t>(values, bytes); break;
    case DType::i32: write_all<int32_t>(values, bytes); break;
    case DType::boolean: {
      bytes.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) bytes[i] = values[i] != In{0} ? 1 : 0;
      break;
    }
  }
  return bytes;
}

}  // namespace

std::vector<double> data_as_doubles(const Tensor &t) { return decode<double>(t); }
std::vector<int64_t> data_as_ints(const Tensor &t) { return decode<int64_t>(t); }
std::vector<uint8_t> encode_doubles(DType dtype, const std::vector<double> &values) { return encode(dtype, values); }
std::vector<uint8_t> encode_ints(DType dtype, const std::vector<int64_t> &values) { return encode(dtype, values); }

}  // namespace cleave
