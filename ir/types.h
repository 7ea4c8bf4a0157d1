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

enum class DType : uint8_t { f32, f64, i64, i32, boolean };
/** "f32", "f64", "i64", "i32", "bool". */
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
/** Size of one element in bytes. */
int dtype_size(DType t);
bool is_float(DType t);

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
static_assert(kNumOpKinds == 79, "ops.def changed: update every table indexed by OpKind, then this count");

std::string_view op_kind_name(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view s);

/** Number of elements; throws UserError naming `what` if the product overflows int64 or a dim is negative. */
int64_t checked_num_elements(const Shape &shape, std::string_view what);
/** Number of elements of a shape known to be valid. */
int64_t num_elements(const Shape &shape);
/** "[2,3,4]". */
std::string shape_str(const Shape &shape);

}  // namespace cleave
