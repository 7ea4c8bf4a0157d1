#include "ir/tensor_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <type_traits>

#include "ir/error.h"
#include "ir/float16.h"

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

/** f16/bf16 bits to Out through their exact double value. */
template <typename Out>
void read_half(const std::vector<uint8_t> &bytes, std::vector<Out> &out, double (*value)(uint16_t)) {
  std::vector<uint16_t> bits;
  read_all<uint16_t, uint16_t>(bytes, bits);
  out.resize(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = static_cast<Out>(value(bits[i]));
}

template <typename Out>
std::vector<Out> decode(const Tensor &t) {
  if (t.zero_init && t.data.empty()) return std::vector<Out>(static_cast<size_t>(num_elements(t.shape)), Out(0));
  CLEAVE_CHECK(t.data.size() == static_cast<size_t>(num_elements(t.shape) * dtype_size(t.dtype)),
               "tensor \"", t.name, "\" has ", t.data.size(), " data bytes for shape ", shape_str(t.shape));
  std::vector<Out> out;
  switch (t.dtype) {
    case DType::f32: read_all<Out, float>(t.data, out); break;
    case DType::f64: read_all<Out, double>(t.data, out); break;
    case DType::i64: read_all<Out, int64_t>(t.data, out); break;
    case DType::i32: read_all<Out, int32_t>(t.data, out); break;
    case DType::boolean: read_all<Out, uint8_t>(t.data, out); break;
    case DType::f16: read_half(t.data, out, double_from_f16_bits); break;
    case DType::bf16: read_half(t.data, out, double_from_bf16_bits); break;
    case DType::i8: read_all<Out, int8_t>(t.data, out); break;
    case DType::i16: read_all<Out, int16_t>(t.data, out); break;
    case DType::u8: read_all<Out, uint8_t>(t.data, out); break;
    case DType::u16: read_all<Out, uint16_t>(t.data, out); break;
    case DType::u32: read_all<Out, uint32_t>(t.data, out); break;
    case DType::u64: read_all<Out, uint64_t>(t.data, out); break;
  }
  return out;
}

/** One value as a `Store`: floats convert with rounding to nearest; integers truncate toward zero and wrap modulo
 *  2^bits (store_as), so an out-of-range value is never undefined behaviour. */
template <typename Store, typename In>
Store to_store(In v, DType dtype) {
  if constexpr (std::is_floating_point_v<Store> || std::is_integral_v<In>) {
    return static_cast<Store>(v);  // floats round to nearest; integer narrowing is modular
  } else {
    // Truncate and wrap in double first (store_as); what is left outside Store's range (only near 2^63 or 2^64,
    // where doubles are sparse) saturates instead of being undefined behaviour.
    double w = store_as(dtype, static_cast<double>(v));
    double lo = static_cast<double>(std::numeric_limits<Store>::min());
    double hi = std::ldexp(1.0, std::numeric_limits<Store>::digits);  // max + 1
    if (w < lo) return std::numeric_limits<Store>::min();
    if (w >= hi) return std::numeric_limits<Store>::max();
    return static_cast<Store>(w);
  }
}

template <typename Store, typename In>
void write_all(const std::vector<In> &values, std::vector<uint8_t> &bytes, DType dtype) {
  bytes.resize(values.size() * sizeof(Store));
  for (size_t i = 0; i < values.size(); ++i) {
    Store v = to_store<Store>(values[i], dtype);
    std::memcpy(bytes.data() + i * sizeof(Store), &v, sizeof(Store));
  }
}

template <typename In>
void write_half(const std::vector<In> &values, std::vector<uint8_t> &bytes, uint16_t (*bits)(double)) {
  std::vector<uint16_t> b(values.size());
  for (size_t i = 0; i < values.size(); ++i) b[i] = bits(static_cast<double>(values[i]));
  bytes.resize(b.size() * 2);
  std::memcpy(bytes.data(), b.data(), bytes.size());
}

template <typename In>
std::vector<uint8_t> encode(DType dtype, const std::vector<In> &values) {
  std::vector<uint8_t> bytes;
  switch (dtype) {
    case DType::f32: write_all<float>(values, bytes, dtype); break;
    case DType::f64: write_all<double>(values, bytes, dtype); break;
    case DType::i64: write_all<int64_t>(values, bytes, dtype); break;
    case DType::i32: write_all<int32_t>(values, bytes, dtype); break;
    case DType::f16: write_half(values, bytes, f16_bits_from_double); break;
    case DType::bf16: write_half(values, bytes, bf16_bits_from_double); break;
    case DType::i8: write_all<int8_t>(values, bytes, dtype); break;
    case DType::i16: write_all<int16_t>(values, bytes, dtype); break;
    case DType::u8: write_all<uint8_t>(values, bytes, dtype); break;
    case DType::u16: write_all<uint16_t>(values, bytes, dtype); break;
    case DType::u32: write_all<uint32_t>(values, bytes, dtype); break;
    case DType::u64: write_all<uint64_t>(values, bytes, dtype); break;
    case DType::boolean: {
      bytes.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) bytes[i] = values[i] != In{0} ? 1 : 0;
      break;
    }
  }
  return bytes;
}

/** Why `ref`'s file cannot supply its bytes, or "" if it can. Symlinks are refused: the frontend resolved them when it
 *  checked that the file lies inside the model's directory, so a link appearing later would bypass that check. */
std::string external_problem(const ExternalData &ref) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file(ref.file);
  if (!fs::exists(fs::symlink_status(file, ec))) return "does not exist";
  if (fs::is_symlink(fs::symlink_status(file, ec))) return "is a symlink";
  if (!fs::is_regular_file(file, ec)) return "is not a regular file";
  fs::path canon = fs::canonical(file, ec);
  if (ec || canon != file) return "is reached through a symlink";
  auto size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) return "cannot be read";
  int64_t end = 0;
  if (__builtin_add_overflow(ref.offset, ref.length, &end) || end > size)
    return "has " + std::to_string(size) + " bytes";
  return "";
}

int64_t tensor_nbytes(const Tensor &t) { return num_elements(t.shape) * dtype_size(t.dtype); }

}  // namespace

std::vector<uint8_t> tensor_bytes(const Tensor &t) {
  if (t.zero_init && t.data.empty()) return std::vector<uint8_t>(static_cast<size_t>(tensor_nbytes(t)), 0);
  if (!t.external) return t.data;
  const ExternalData &ref = *t.external;
  CLEAVE_CHECK(ref.length == tensor_nbytes(t), "tensor \"", t.name, "\" references ", ref.length,
               " bytes for shape ", shape_str(t.shape));
  std::string problem = external_problem(ref);
  if (!problem.empty())
    CLEAVE_USER_ERROR("tensor \"", t.name, "\": external data file ", ref.file, " ", problem, " (needs bytes ",
                      ref.offset, "..", ref.offset + ref.length, ")");
  std::vector<uint8_t> bytes(static_cast<size_t>(ref.length));
  std::ifstream in(ref.file, std::ios::binary);
  in.seekg(ref.offset);
  in.read(reinterpret_cast<char *>(bytes.data()), ref.length);
  if (!in) CLEAVE_USER_ERROR("tensor \"", t.name, "\": reading external data file ", ref.file, " failed");
  return bytes;
}

void load_external_data(Graph &g) {
  for (TensorId id = 0; id < g.num_tensors(); ++id) {
    Tensor &t = g.tensor(id);
    if (!t.external) continue;
    t.data = tensor_bytes(t);
    t.external.reset();
  }
}

void check_external_data(const Graph &g) {
  // Per file, the end of the furthest range any tensor needs.
  std::map<std::string, int64_t> needed;
  for (const Tensor &t : g.tensors())
    if (t.external) {
      int64_t &end = needed[t.external->file];
      end = std::max(end, t.external->offset + t.external->length);
    }
  std::string missing;
  for (const auto &[file, end] : needed) {
    std::string problem = external_problem(ExternalData{file, 0, end});
    if (!problem.empty())
      missing += (missing.empty() ? "" : "; ") + file + " (needs " + std::to_string(end) + " bytes; " + problem + ")";
  }
  if (!missing.empty()) CLEAVE_USER_ERROR("external data missing: ", missing);
}

std::vector<double> data_as_doubles(const Tensor &t) { return decode<double>(t); }
std::vector<int64_t> data_as_ints(const Tensor &t) { return decode<int64_t>(t); }
std::vector<uint8_t> encode_doubles(DType dtype, const std::vector<double> &values) { return encode(dtype, values); }
std::vector<uint8_t> encode_ints(DType dtype, const std::vector<int64_t> &values) { return encode(dtype, values); }

}  // namespace cleave
