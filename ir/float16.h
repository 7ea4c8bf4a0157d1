#pragma once
// IEEE 754 binary16 (f16) and bfloat16 (bf16) conversions, and the value a double becomes when stored in any dtype.
// The reference interpreter computes in doubles and stores through store_as; encode/decode in tensor_data.h use the
// bit conversions. Rounding is to nearest, ties to even, from double directly (no detour through float, which would
// round twice).
#include <cstdint>

#include "ir/types.h"

namespace cleave {

/** binary16 bits of `v` rounded to nearest even: overflow to +-inf (|v| >= 65520), subnormals below 2^-14, NaN to a
 *  quiet NaN (0x7E00 with v's sign). */
uint16_t f16_bits_from_double(double v);
/** The exact value of binary16 bits (every f16 value is a double). */
double double_from_f16_bits(uint16_t bits);
/** bfloat16 bits of `v` rounded to nearest even (the float32 layout's upper half): ONNX Cast to BFLOAT16 from opset
 *  19 on specifies this rounding; NaN stays a quiet NaN (0x7FC0 with v's sign). */
uint16_t bf16_bits_from_double(double v);
double double_from_bf16_bits(uint16_t bits);

/** What storing `v` in an element of `t` keeps: f32/f16/bf16 round to nearest even, f64 is exact, integers truncate
 *  toward zero and wrap modulo 2^bits (two's complement, as C++ and numpy store a uint8 sum), bool is v != 0.
 *  Integers are exact below 2^53 (the interpreter's double); NaN or inf stored to an integer gives 0. */
double store_as(DType t, double v);

}  // namespace cleave
