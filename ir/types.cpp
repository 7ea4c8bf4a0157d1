#include "ir/types.h"

#include <array>

#include "ir/error.h"

namespace cleave {
namespace {

constexpr std::array<std::string_view, kNumOpKinds> kOpKindNames = {
#define CLEAVE_OP(name) #name,
#include "ir/ops.def"
#undef CLEAVE_OP
};

constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {"f32", "f64", "i64", "i32", "bool", "f16", "bf16",
                                                                 "i8",  "i16", "u8",  "u16", "u32", "u64"};
constexpr std::array<std::string_view, 7> kRoleNames = {"input", "label",           "param",   "activation",
                                                        "grad",  "optimizer_state", "constant"};
constexpr std::array<std::string_view, 3> kPhaseNames = {"forward", "backward", "update"};

template <typename Enum, size_t N>
std::optional<Enum> parse_enum(const std::array<std::string_view, N> &names, std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace

std::string_view dtype_name(DType t) { return kDTypeNames[static_cast<size_t>(t)]; }
std::optional<DType> parse_dtype(std::string_view s) { return parse_enum<DType>(kDTypeNames, s); }
int dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::i32: return 4;
    case DType::boolean: return 1;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::i16: return 2;
    case DType::u8: return 1;
    case DType::u16: return 2;
    case DType::u32: return 4;
    case DType::u64: return 8;
  }
  CLEAVE_CHECK(false, "bad dtype");
  return 0;
}
bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
bool is_unsigned(DType t) { return t == DType::u8 || t == DType::u16 || t == DType::u32 || t == DType::u64; }
bool is_integer(DType t) {
  return is_unsigned(t) || t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}
bool codegen_supports(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::i64 || t == DType::i32 || t == DType::boolean;
}

std::string_view role_name(Role r) { return kRoleNames[static_cast<size_t>(r)]; }
std::optional<Role> parse_role(std::string_view s) { return parse_enum<Role>(kRoleNames, s); }
std::string_view phase_name(Phase p) { return kPhaseNames[static_cast<size_t>(p)]; }
std::optional<Phase> parse_phase(std::string_view s) { return parse_enum<Phase>(kPhaseNames, s); }
std::string_view op_kind_name(OpKind k) { return kOpKindNames[static_cast<size_t>(k)]; }
std::optional<OpKind> parse_op_kind(std::string_view s) { return parse_enum<OpKind>(kOpKindNames, s); }

int64_t checked_num_elements(const Shape &shape, std::string_view what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) CLEAVE_USER_ERROR(what, ": negative dimension in shape ", shape_str(shape));
    if (__builtin_mul_overflow(n, d, &n))
      CLEAVE_USER_ERROR(what, ": element count of shape ", shape_str(shape), " overflows int64");
  }
  return n;
}

int64_t num_elements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace cleave
