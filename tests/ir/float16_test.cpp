// f16/bf16 conversions (ir/float16.h) against known IEEE bit patterns and against numpy (float16) and torch
// (bfloat16) on the values of tests/ir/float16_reference.txt; store_as's integer wrapping; encode/decode of every
// new dtype through tensor_data.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "ir/float16.h"
#include "ir/tensor_data.h"

namespace cleave {
namespace {

// binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits (IEEE 754-2008 §3.6).
TEST(Float16, KnownBitPatterns) {
  EXPECT_EQ(f16_bits_from_double(1.0), 0x3C00);         // exponent field 15 = 2^0
  EXPECT_EQ(f16_bits_from_double(-2.0), 0xC000);        // sign, exponent 16
  EXPECT_EQ(f16_bits_from_double(65504.0), 0x7BFF);     // largest finite: (2 - 2^-10) * 2^15
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_bits_from_double(-0.0), 0x8000);
  EXPECT_EQ(f16_bits_from_double(INFINITY), 0x7C00);
  EXPECT_EQ(f16_bits_from_double(-INFINITY), 0xFC00);
  EXPECT_EQ(double_from_f16_bits(0x3C00), 1.0);
  EXPECT_EQ(double_from_f16_bits(0x7BFF), 65504.0);
  EXPECT_EQ(double_from_f16_bits(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(double_from_f16_bits(0x03FF), std::ldexp(1023.0, -24));  // largest subnormal
  EXPECT_TRUE(std::isinf(double_from_f16_bits(0xFC00)) && double_from_f16_bits(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(double_from_f16_bits(0x7E00)));
  EXPECT_TRUE(std::isnan(double_from_f16_bits(f16_bits_from_double(NAN))));
  EXPECT_TRUE(std::signbit(double_from_f16_bits(0x8000)));
}

TEST(Float16, TiesRoundToEven) {
  // 1 + 2^-11 lies halfway between 1 (0x3C00, even) and 1 + 2^-10 (0x3C01): even wins; 1 + 3*2^-11 lies between
  // 0x3C01 and 0x3C02: 0x3C02. Anything above the tie rounds up.
  EXPECT_EQ(f16_bits_from_double(1 + std::ldexp(1.0, -11)), 0x3C00);
  EXPECT_EQ(f16_bits_from_double(1 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(f16_bits_from_double(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3C01);
  // Subnormal ties: 2^-25 is half the smallest subnormal (rounds to 0), 3*2^-25 is between 0x0001 and 0x0002.
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(f16_bits_from_double(3 * std::ldexp(1.0, -25)), 0x0002);
  // Overflow: 65520 is halfway between 65504 and 2^16 (odd mantissa 0x3FF below it), so it rounds to inf.
  EXPECT_EQ(f16_bits_from_double(65520.0), 0x7C00);
  EXPECT_EQ(f16_bits_from_double(65519.99), 0x7BFF);
  // The largest subnormal plus half an ulp rounds up into the smallest normal.
  EXPECT_EQ(f16_bits_from_double(std::ldexp(1023.5, -24)), 0x0400);
}

// bfloat16: float32's upper 16 bits (1 sign, 8 exponent bits with bias 127, 7 mantissa bits).
TEST(BFloat16, KnownBitPatterns) {
  EXPECT_EQ(bf16_bits_from_double(1.0), 0x3F80);
  EXPECT_EQ(bf16_bits_from_double(-2.0), 0xC000);
  EXPECT_EQ(bf16_bits_from_double(INFINITY), 0x7F80);
  EXPECT_EQ(bf16_bits_from_double(1.0 + std::ldexp(1.0, -8)), 0x3F80);      // tie to even (down)
  EXPECT_EQ(bf16_bits_from_double(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(bf16_bits_from_double(std::ldexp(1.0, -133)), 0x0001);          // smallest subnormal
  EXPECT_EQ(bf16_bits_from_double(std::ldexp(1.0, 128)), 0x7F80);           // overflow
  EXPECT_EQ(double_from_bf16_bits(0x7F7F), std::ldexp(255.0, 120));         // largest finite
  EXPECT_TRUE(std::isnan(double_from_bf16_bits(bf16_bits_from_double(NAN))));
}

TEST(Float16, MatchesNumpyAndTorch) {
  std::ifstream in(std::string(CLEAVE_SOURCE_DIR) + "/tests/ir/float16_reference.txt");
  ASSERT_TRUE(in) << "tests/ir/float16_reference.txt missing";
  std::string line;
  int f16 = 0, bf16 = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string kind, value, bits;
    ls >> kind >> value >> bits;
    double v = std::strtod(value.c_str(), nullptr);
    auto want = static_cast<uint16_t>(std::stoul(bits, nullptr, 16));
    if (kind == "f16") {
      ++f16;
      EXPECT_EQ(f16_bits_from_double(v), want) << line;
      // Every f16 value is a double: decoding and re-encoding is the identity.
      EXPECT_EQ(f16_bits_from_double(double_from_f16_bits(want)), want) << line;
    } else {
      ++bf16;
      EXPECT_EQ(bf16_bits_from_double(v), want) << line;
      EXPECT_EQ(bf16_bits_from_double(double_from_bf16_bits(want)), want) << line;
    }
  }
  EXPECT_GE(f16, 100);
  EXPECT_GE(bf16, 80);
}

TEST(Float16, EveryHalfRoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    auto bits = static_cast<uint16_t>(b);
    double v = double_from_f16_bits(bits);
    if (std::isnan(v)) continue;
    ASSERT_EQ(f16_bits_from_double(v), bits) << std::hex << b;
    // A float holds every half exactly too, so the detour through float used by f32 kernels changes nothing.
    ASSERT_EQ(static_cast<double>(static_cast<float>(v)), v);
  }
}

TEST(StoreAs, IntegersTruncateAndWrap) {
  EXPECT_EQ(store_as(DType::u8, 256.0 + 44.0), 44.0);  // 200 + 100 as uint8 = 300 mod 256
  EXPECT_EQ(store_as(DType::u8, -1.0), 255.0);
  EXPECT_EQ(store_as(DType::i8, 128.0), -128.0);
  EXPECT_EQ(store_as(DType::i8, -129.0), 127.0);
  EXPECT_EQ(store_as(DType::i16, 40000.0), 40000.0 - 65536.0);
  EXPECT_EQ(store_as(DType::u16, 70000.5), 70000.0 - 65536.0);
  EXPECT_EQ(store_as(DType::u32, -2.0), 4294967294.0);
  EXPECT_EQ(store_as(DType::i32, 2147483648.0), -2147483648.0);
  EXPECT_EQ(store_as(DType::i64, -7.9), -7.0);
  EXPECT_EQ(store_as(DType::u64, 12345.0), 12345.0);
  EXPECT_EQ(store_as(DType::boolean, -0.5), 1.0);
  EXPECT_EQ(store_as(DType::f16, 0.1), double_from_f16_bits(0x2E66));
  EXPECT_EQ(store_as(DType::f32, 0.1), static_cast<double>(0.1f));
}

TEST(TensorData, EncodeDecodeNewDTypes) {
  struct Case {
    DType dtype;
    std::vector<double> in, out;
  };
  const std::vector<Case> cases = {
      {DType::f16, {1.0, -2.5, 65536.0, 0.1}, {1.0, -2.5, INFINITY, double_from_f16_bits(0x2E66)}},
      {DType::bf16, {1.0, -2.5, 1.00390625}, {1.0, -2.5, 1.0}},
      {DType::i8, {-128, 127, 130}, {-128, 127, -126}},
      {DType::i16, {-300, 32767}, {-300, 32767}},
      {DType::u8, {0, 255, 256, -1}, {0, 255, 0, 255}},
      {DType::u16, {65535, 65536}, {65535, 0}},
      {DType::u32, {4294967295.0, 7.9}, {4294967295.0, 7}},
      {DType::u64, {0, 9007199254740992.0}, {0, 9007199254740992.0}},
  };
  for (const Case &c : cases) {
    Tensor t;
    t.name = "t";
    t.dtype = c.dtype;
    t.shape = {static_cast<int64_t>(c.in.size())};
    t.data = encode_doubles(c.dtype, c.in);
    ASSERT_EQ(t.data.size(), c.in.size() * static_cast<size_t>(dtype_size(c.dtype))) << dtype_name(c.dtype);
    EXPECT_EQ(data_as_doubles(t), c.out) << dtype_name(c.dtype);
    EXPECT_EQ(parse_dtype(dtype_name(c.dtype)), c.dtype);
  }
  // u64 values above 2^63 survive the int64 path bit for bit.
  Tensor big;
  big.name = "big";
  big.dtype = DType::u64;
  big.shape = {1};
  big.data = encode_ints(DType::u64, {-1});
  EXPECT_EQ(data_as_ints(big)[0], -1);
  EXPECT_EQ(data_as_doubles(big)[0], 18446744073709551615.0);
}

}  // namespace
}  // namespace cleave
