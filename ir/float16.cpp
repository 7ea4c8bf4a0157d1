#include "ir/float16.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace cleave {
namespace {

/** x rounded to the nearest integer, ties to even; independent of the floating-point environment's mode. */
double round_half_even(double x) {
  double r = std::floor(x);
  double diff = x - r;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

/** Bits of a binary format with `mant` stored mantissa bits and exponent bias `bias` (exponent field all ones for
 *  inf/NaN), for finite |v| < the overflow threshold (the caller handles overflow, inf and NaN). The rounded
 *  significand is scaled so that an increment that carries out of the mantissa lands in the exponent field, which
 *  is exactly the next binade (or inf at the top). */
uint32_t round_magnitude(double a, int mant, int bias) {
  if (a == 0.0) return 0;
  int min_exp = 1 - bias;  // exponent of the smallest normal
  int e = std::ilogb(a);
  if (e < min_exp) {
    // Subnormal: a multiple of 2^(min_exp - mant); rounding up to 2^mant gives the smallest normal's bits.
    return static_cast<uint32_t>(round_half_even(std::ldexp(a, mant - min_exp)));
  }
  double q = round_half_even(std::ldexp(a, mant - e));  // in [2^mant, 2^(mant+1)]
  return (static_cast<uint32_t>(e + bias) << mant) + static_cast<uint32_t>(q) - (1u << mant);
}

double decode(uint16_t bits, int mant, int exp_bits, int bias) {
  bool neg = (bits >> 15) & 1;
  uint32_t e = (bits >> mant) & ((1u << exp_bits) - 1);
  uint32_t m = bits & ((1u << mant) - 1);
  double v;
  if (e == (1u << exp_bits) - 1)
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant);
  else
    v = std::ldexp(static_cast<double>(m | (1u << mant)), static_cast<int>(e) - bias - mant);
  return neg ? -v : v;
}

/** v truncated toward zero and wrapped into `bits` bits (signed: two's complement). */
double wrap_int(double v, int bits, bool is_signed) {
  if (!std::isfinite(v)) return 0.0;
  double t = std::trunc(v);
  if (bits >= 64) {
    // Beyond 2^53 a double cannot hold every integer anyway; wrap by the modulus where it is out of range.
    double m = std::ldexp(1.0, 64);
    if (!is_signed && t < 0) t += m;
    if (is_signed && t >= m / 2) t -= m;
    return t;
  }
  double m = std::ldexp(1.0, bits);
  t = std::fmod(t, m);  // exact; same sign as t
  if (t < 0) t += m;
  if (is_signed && t >= m / 2) t -= m;
  return t;
}

}  // namespace

uint16_t f16_bits_from_double(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7E00;
  double a = std::fabs(v);
  // 65520 = 65504 + half an ulp: from there on the nearest even value is 2^16, which overflows.
  if (a >= 65520.0) return sign | 0x7C00;
  return static_cast<uint16_t>(sign | round_magnitude(a, 10, 15));
}

double double_from_f16_bits(uint16_t bits) { return decode(bits, 10, 5, 15); }

uint16_t bf16_bits_from_double(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7FC0;
  double a = std::fabs(v);
  // The largest bf16 is (2 - 2^-7) * 2^127; from half an ulp above it, rounding gives 2^128 = inf.
  if (a >= std::ldexp(2.0 - std::ldexp(1.0, -8), 127)) return sign | 0x7F80;
  return static_cast<uint16_t>(sign | round_magnitude(a, 7, 127));
}

double double_from_bf16_bits(uint16_t bits) { return decode(bits, 7, 8, 127); }

double store_as(DType t, double v) {
  switch (t) {
    case DType::f32: return static_cast<double>(static_cast<float>(v));
    case DType::f64: return v;
    case DType::f16: return double_from_f16_bits(f16_bits_from_double(v));
    case DType::bf16: return double_from_bf16_bits(bf16_bits_from_double(v));
    case DType::boolean: return v != 0.0 ? 1.0 : 0.0;
    case DType::i8: return wrap_int(v, 8, true);
    case DType::i16: return wrap_int(v, 16, true);
    case DType::i32: return wrap_int(v, 32, true);
    case DType::i64: return wrap_int(v, 64, true);
    case DType::u8: return wrap_int(v, 8, false);
    case DType::u16: return wrap_int(v, 16, false);
    case DType::u32: return wrap_int(v, 32, false);
    case DType::u64: return wrap_int(v, 64, false);
  }
  return v;
}

}  // namespace cleave
