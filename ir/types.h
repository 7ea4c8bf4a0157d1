#pragma once
// Basic vocabulary of the IR: ids, dtypes, shapes, roles, phases, op kinds.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cleave {

/** Dense index of a Tensor in its Graph. */
using TensorId = int32_t;
/** Dense index of an Op in its Graph. */
using OpId = int32_t;
/** Marks an absent optional operand. */
inline constexpr TensorId kNoTensor = -1;
inline constexpr OpId kNoOp = -1;

using Shape = std::vector<int64_t>;

/** Element types. ONNX's numeric tensor types except complex; new kinds are appended so existing values keep their
 *  numbers. Code generation and the bundle runtime support only f32, f64, i64, i32 and bool (codegen_supports). */
enum class DType : uint8_t { f32, f64, i64, i32, boolean, f16, bf16, i8, i16, u8, u16, u32, u64 };
inline constexpr int kNumDTypes = 13;
/** "f32", "f64", "i64", "i32", "bool", "f16", "bf16", "i8", "i16", "u8", "u16", "u32", "u64". */
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
/** Size of one element in bytes. */
int dtype_size(DType t);
/** f32, f64, f16, bf16. */
bool is_float(DType t);
/** The signed and unsigned integer types (not bool). */
bool is_integer(DType t);
bool is_unsigned(DType t);
/** Whether code generation and the bundle runtime have kernels and buffers for `t`. */
bool codegen_supports(DType t);

enum class Role : uint8_t { input, label, param, activation, grad, optimizer_state, constant };
std::string_view role_name(Role r);
std::optional<Role> parse_role(std::string_view s);

enum class Phase : uint8_t { forward, backward, update };
std::string_view phase_name(Phase p);
std::optional<Phase> parse_phase(std::string_view s);

enum class OpKind : uint16_t {
#define CLEAVE_OP(name) name,
#include "ir/ops.def"
#undef CLEAVE_OP
};

inline constexpr int kNumOpKinds = 0
#define CLEAVE_OP(name) +1
#include "ir/ops.def"
#undef CLEAVE_OP
    ;
static_assert(kNumOpKinds == 148, "ops.def changed: update every table indexed by OpKind, then this count");

std::string_view op_kind_name(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view s);

/** Number of elements; throws UserError naming `what` if the product overflows int64 or a dim is negative. */
int64_t checked_num_elements(const Shape &shape, std::string_view what);
/** Number of elements of a shape known to be valid. */
int64_t num_elements(const Shape &shape);
/** "[2,3,4]". */
std::string shape_str(const Shape &shape);

}  // namespace cleave
