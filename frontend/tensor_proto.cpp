#include "frontend/tensor_proto.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ir/error.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

namespace fs = std::filesystem;

/** True if `path` is `dir` or lies below it (both canonical). */
bool is_within(const fs::path &dir, const fs::path &path) {
  auto d = dir.begin(), p = path.begin();
  for (; d != dir.end(); ++d, ++p) {
    if (d->empty()) continue;  // trailing separator of dir
    if (p == path.end() || *d != *p) return false;
  }
  return true;
}

struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
};

void check_length(const ExternalRef &ref, const std::string &what, int64_t nbytes) {
  if (ref.length && *ref.length < nbytes)
    CLEAVE_USER_ERROR(what, ": external data length ", *ref.length, " in \"", ref.location, "\" is shorter than the ",
                      nbytes, " bytes its shape needs");
}

ExternalRef external_ref(const onnx::TensorProto &tp, const std::string &what) {
  ExternalRef ref;
  for (const auto &e : tp.external_data()) {
    try {
      if (e.key() == "location") ref.location = e.value();
      else if (e.key() == "offset") ref.offset = std::stoll(e.value());
      else if (e.key() == "length") ref.length = std::stoll(e.value());
    } catch (const std::exception &) {
      CLEAVE_USER_ERROR(what, ": external data ", e.key(), " \"", e.value(), "\" is not an integer");
    }
  }
  if (ref.location.empty()) CLEAVE_USER_ERROR(what, ": external data has no location");
  if (ref.offset < 0 || (ref.length && *ref.length < 0))
    CLEAVE_USER_ERROR(what, ": external data has a negative offset or length");
  return ref;
}

/** `tp`'s external data file, canonical (symlinks resolved, as far as the path exists), checked to lie inside
 *  model_dir; the file itself need not exist. */
std::filesystem::path resolve_external(const ExternalRef &ref, const std::string &model_dir, const std::string &what) {
  if (model_dir.empty()) CLEAVE_USER_ERROR(what, ": external data \"", ref.location, "\" is not allowed here");
  fs::path loc(ref.location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory())
    CLEAVE_USER_ERROR(what, ": external data location \"", ref.location, "\" is absolute; it must be relative to ",
                      "the model's directory");
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::absolute(model_dir), ec);
  fs::path file = ec ? fs::path() : fs::weakly_canonical(fs::absolute(model_dir) / loc, ec);
  if (ec) CLEAVE_USER_ERROR(what, ": cannot resolve external data file \"", ref.location, "\": ", ec.message());
  if (!is_within(dir, file))
    CLEAVE_USER_ERROR(what, ": external data file \"", ref.location, "\" lies outside the model's directory ",
                      dir.string());
  return file;
}

/** The checked file of `tp`'s external data and its offset: inside model_dir, holding `nbytes` bytes. */
std::pair<std::filesystem::path, int64_t> locate_external(const onnx::TensorProto &tp, const std::string &model_dir,
                                                          const std::string &what, int64_t nbytes) {
  ExternalRef ref = external_ref(tp, what);
  fs::path file = resolve_external(ref, model_dir, what);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    CLEAVE_USER_ERROR(what, ": external data file \"", ref.location, "\" does not exist (looked for ", file.string(),
                      ")");
  auto size = static_cast<int64_t>(fs::file_size(file, ec));
  if (ec) CLEAVE_USER_ERROR(what, ": cannot read external data file \"", ref.location, "\": ", ec.message());
  check_length(ref, what, nbytes);
  int64_t end = 0;
  if (__builtin_add_overflow(ref.offset, ref.length.value_or(nbytes), &end) || end > size)
    CLEAVE_USER_ERROR(what, ": external data file \"", ref.location, "\" has ", size, " bytes, fewer than offset ",
                      ref.offset, " + length ", ref.length.value_or(nbytes));
  return {file, ref.offset};
}

/** Reads `nbytes` bytes of external data, checking that the file lies inside model_dir. */
std::vector<uint8_t> read_external(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what,
                                   int64_t nbytes) {
  auto [file, offset] = locate_external(tp, model_dir, what, nbytes);
  std::ifstream in(file, std::ios::binary);
  std::vector<uint8_t> bytes(static_cast<size_t>(nbytes));
  in.seekg(offset);
  in.read(reinterpret_cast<char *>(bytes.data()), nbytes);
  if (!in) CLEAVE_USER_ERROR(what, ": reading external data file ", file.string(), " failed");
  return bytes;
}

template <typename T, typename Field>
std::vector<uint8_t> pack(const Field &field) {
  std::vector<uint8_t> bytes(static_cast<size_t>(field.size()) * sizeof(T));
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
  return bytes;
}

/** The typed-field payload in dtype-native bytes, and how many values it holds. */
std::pair<std::vector<uint8_t>, int64_t> typed_field(const onnx::TensorProto &tp, DType dt) {
  switch (dt) {
    case DType::f32: return {pack<float>(tp.float_data()), tp.float_data_size()};
    case DType::f64: return {pack<double>(tp.double_data()), tp.double_data_size()};
    case DType::i64: return {pack<int64_t>(tp.int64_data()), tp.int64_data_size()};
    case DType::i32: return {pack<int32_t>(tp.int32_data()), tp.int32_data_size()};
    case DType::boolean: return {pack<uint8_t>(tp.int32_data()), tp.int32_data_size()};
    // ONNX stores the narrow types in int32_data, float16 and bfloat16 as their raw bits in the low 16 bits, and the
    // unsigned 32/64-bit types in uint64_data.
    case DType::f16:
    case DType::bf16:
    case DType::u16: return {pack<uint16_t>(tp.int32_data()), tp.int32_data_size()};
    case DType::i16: return {pack<int16_t>(tp.int32_data()), tp.int32_data_size()};
    case DType::i8: return {pack<int8_t>(tp.int32_data()), tp.int32_data_size()};
    case DType::u8: return {pack<uint8_t>(tp.int32_data()), tp.int32_data_size()};
    case DType::u32: return {pack<uint32_t>(tp.uint64_data()), tp.uint64_data_size()};
    case DType::u64: return {pack<uint64_t>(tp.uint64_data()), tp.uint64_data_size()};
  }
  return {};
}

/** How many values the typed field of `dt` holds. */
int64_t typed_field_size(const onnx::TensorProto &tp, DType dt) {
  switch (dt) {
    case DType::f32: return tp.float_data_size();
    case DType::f64: return tp.double_data_size();
    case DType::i64: return tp.int64_data_size();
    case DType::u32:
    case DType::u64: return tp.uint64_data_size();
    default: return tp.int32_data_size();
  }
}

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::DOUBLE: return DType::f64;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::BOOL: return DType::boolean;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::INT16: return DType::i16;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::UINT16: return DType::u16;
    case onnx::TensorProto::UINT32: return DType::u32;
    case onnx::TensorProto::UINT64: return DType::u64;
    default: return std::nullopt;
  }
}

int32_t onnx_from_dtype(DType t) {
  switch (t) {
    case DType::f32: return onnx::TensorProto::FLOAT;
    case DType::f64: return onnx::TensorProto::DOUBLE;
    case DType::i64: return onnx::TensorProto::INT64;
    case DType::i32: return onnx::TensorProto::INT32;
    case DType::boolean: return onnx::TensorProto::BOOL;
    case DType::f16: return onnx::TensorProto::FLOAT16;
    case DType::bf16: return onnx::TensorProto::BFLOAT16;
    case DType::i8: return onnx::TensorProto::INT8;
    case DType::i16: return onnx::TensorProto::INT16;
    case DType::u8: return onnx::TensorProto::UINT8;
    case DType::u16: return onnx::TensorProto::UINT16;
    case DType::u32: return onnx::TensorProto::UINT32;
    case DType::u64: return onnx::TensorProto::UINT64;
  }
  return onnx::TensorProto::UNDEFINED;
}

std::string onnx_dtype_name(int32_t elem_type) {
  if (onnx::TensorProto::DataType_IsValid(elem_type)) {
    std::string n = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type));
    for (char &c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  }
  return "type " + std::to_string(elem_type);
}

int64_t tensor_proto_bytes(const onnx::TensorProto &tp, const std::string &what) {
  std::optional<DType> dt = dtype_from_onnx(tp.data_type());
  if (!dt) CLEAVE_USER_ERROR(what, ": element type ", onnx_dtype_name(tp.data_type()), " is not supported");
  Shape shape(tp.dims().begin(), tp.dims().end());
  int64_t n = checked_num_elements(shape, what), nbytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(*dt)), &nbytes))
    CLEAVE_USER_ERROR(what, ": byte size of shape ", shape_str(shape), " overflows int64");
  return nbytes;
}

std::string external_data_path(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what) {
  return locate_external(tp, model_dir, what, tensor_proto_bytes(tp, what)).first.string();
}

ExternalData external_data_ref(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what) {
  int64_t nbytes = tensor_proto_bytes(tp, what);
  ExternalRef ref = external_ref(tp, what);
  check_length(ref, what, nbytes);
  int64_t end = 0;
  if (__builtin_add_overflow(ref.offset, nbytes, &end))
    CLEAVE_USER_ERROR(what, ": external data offset ", ref.offset, " + ", nbytes, " bytes overflows int64");
  return ExternalData{resolve_external(ref, model_dir, what).string(), ref.offset, nbytes};
}

void check_inline_data(const onnx::TensorProto &tp, const std::string &what) {
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) return;
  int64_t nbytes = tensor_proto_bytes(tp, what);
  DType dt = *dtype_from_onnx(tp.data_type());
  Shape shape(tp.dims().begin(), tp.dims().end());
  if (tp.has_raw_data()) {
    if (static_cast<int64_t>(tp.raw_data().size()) != nbytes)
      CLEAVE_USER_ERROR(what, ": raw_data has ", tp.raw_data().size(), " bytes, shape ", shape_str(shape), " of ",
                        dtype_name(dt), " needs ", nbytes);
    return;
  }
  int64_t n = nbytes / std::max(dtype_size(dt), 1);
  int64_t count = typed_field_size(tp, dt);
  if (count != n) CLEAVE_USER_ERROR(what, ": holds ", count, " values, shape ", shape_str(shape), " needs ", n);
}

Tensor tensor_from_proto(const onnx::TensorProto &tp, const std::string &model_dir, const std::string &what,
                         bool load_data, bool defer_external) {
  Tensor t;
  t.name = tp.name();
  t.role = Role::constant;
  std::optional<DType> dt = dtype_from_onnx(tp.data_type());
  if (!dt) CLEAVE_USER_ERROR(what, ": element type ", onnx_dtype_name(tp.data_type()), " is not supported");
  t.dtype = *dt;
  t.shape.assign(tp.dims().begin(), tp.dims().end());
  int64_t n = checked_num_elements(t.shape, what);
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(t.dtype)), &nbytes))
    CLEAVE_USER_ERROR(what, ": byte size of shape ", shape_str(t.shape), " overflows int64");
  bool external = tp.data_location() == onnx::TensorProto::EXTERNAL;
  if (external && (defer_external || !load_data)) {
    t.external = external_data_ref(tp, model_dir, what);
    return t;
  }
  if (!external) check_inline_data(tp, what);
  if (!load_data) return t;

  if (external) {
    t.data = read_external(tp, model_dir, what, nbytes);
  } else if (tp.has_raw_data()) {
    t.data.assign(tp.raw_data().begin(), tp.raw_data().end());
  } else {
    t.data = typed_field(tp, t.dtype).first;
  }
  if (t.dtype == DType::boolean)
    for (uint8_t &b : t.data) b = b != 0;
  return t;
}

Tensor read_tensor_proto_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) CLEAVE_USER_ERROR(path, ": cannot open file");
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) CLEAVE_USER_ERROR(path, ": not a serialized onnx TensorProto");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(tp, dir.empty() ? "." : dir, path + ": tensor \"" + tp.name() + "\"");
}

}  // namespace cleave
