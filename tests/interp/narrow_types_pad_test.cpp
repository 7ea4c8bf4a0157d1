// The narrow element types and Pad's edge/reflect modes against numpy (make_reference.py): uint8/int8 arithmetic
// wraps, int32 division truncates (x / 0 is 0, numpy's), float16 arithmetic rounds each result to nearest even, Pad
// modes follow numpy.pad (with a cropping pad).
// Compared exactly: each is one correctly rounded (or exact integer) operation.
#include <gmock/gmock.h>

#include "ir/error.h"
#include "ir/shape_rules.h"
#include "tests/interp/reference_data.h"

namespace cleave::interp::testing {
namespace {

void binary_case(OpKind kind, DType dtype, const std::string &a, const std::string &b, const std::string &want) {
  Case c;
  TensorId x = c.feed(a, dtype), y = c.feed(b, dtype);
  TensorId z = c.out_like(want, dtype);
  c.op(kind, {x, y}, {z});
  expect_matches(c.run(), z, want, 0.0);
}

TEST(InterpNarrowTypes, Uint8ArithmeticWraps) {
  binary_case(OpKind::Add, DType::u8, "u8.a", "u8.b", "u8.add");
  binary_case(OpKind::Sub, DType::u8, "u8.a", "u8.b", "u8.sub");
  binary_case(OpKind::Mul, DType::u8, "u8.a", "u8.b", "u8.mul");
  binary_case(OpKind::Div, DType::u8, "u8.a", "u8.b", "u8.div");
}

TEST(InterpNarrowTypes, Int8ArithmeticWraps) {
  binary_case(OpKind::Add, DType::i8, "i8.a", "i8.b", "i8.add");
  binary_case(OpKind::Mul, DType::i8, "i8.a", "i8.b", "i8.mul");
}

TEST(InterpNarrowTypes, Int32DivisionTruncatesAndGivesZeroForZero) {
  binary_case(OpKind::Div, DType::i32, "i32.a", "i32.b", "i32.div");
}

TEST(InterpNarrowTypes, Float16ArithmeticRoundsEachResult) {
  binary_case(OpKind::Add, DType::f16, "f16.a", "f16.b", "f16.add");
  binary_case(OpKind::Mul, DType::f16, "f16.a", "f16.b", "f16.mul");
  binary_case(OpKind::Div, DType::f16, "f16.a", "f16.b", "f16.div");
}

TEST(InterpNarrowTypes, CastRoundsToFloat16AndWrapsToUint8) {
  Case c;
  TensorId x = c.feed_value("x", Value{DType::f64, {4}, {1 + std::ldexp(1.0, -11), 65520.0, 300.7, -1.5}});
  TensorId h = c.out("h", {4}, DType::f16), u = c.out("u", {4}, DType::u8);
  c.op(OpKind::Cast, {x}, {h}, {{"to", std::string("f16")}});
  c.op(OpKind::Cast, {x}, {u}, {{"to", std::string("u8")}});
  Values v = c.run();
  // 1 + 2^-11 is a tie between 1 and the next half (odd): even wins; 65520 rounds past the largest half to inf.
  EXPECT_THAT(v[static_cast<size_t>(h)]->data, ::testing::ElementsAre(1.0, INFINITY, 300.75, -1.5));
  // Truncation toward zero, then modulo 256 (as C++ and numpy's astype store it).
  EXPECT_THAT(v[static_cast<size_t>(u)]->data, ::testing::ElementsAre(1.0, 240.0, 44.0, 255.0));
}

void pad_case(const std::string &mode) {
  Case c;
  TensorId x = c.feed("pad.x");
  TensorId y = c.out_like("pad." + mode);
  c.op(OpKind::Pad, {x}, {y},
       {{"pads", std::vector<int64_t>{1, -1, 3, 2, 0, 4}}, {"value", 0.0}, {"mode", mode}});
  expect_matches(c.run(), y, "pad." + mode, 0.0);
}

TEST(InterpPad, EdgeModeMatchesNumpy) { pad_case("edge"); }
TEST(InterpPad, ReflectModeMatchesNumpy) { pad_case("reflect"); }

// Reflect mirrors without repeating the border element, so a side can add at most len - 1 elements.
TEST(InterpPad, ReflectBeyondTheDimIsAShapeError) {
  Case c;
  TensorId x = c.feed("pad.x");
  TensorId y = c.out("y", {3, 4, 15});
  OpId op = c.op(OpKind::Pad, {x}, {y}, {{"pads", std::vector<int64_t>{0, 0, 5, 0, 0, 5}}, {"value", 0.0},
                                         {"mode", std::string("reflect")}});
  try {
    infer_output_types(c.g, c.g.op(op));
    ADD_FAILURE() << "no error";
  } catch (const UserError &e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("reflect pads [0,0,5,0,0,5] exceed dim 2 of X [3,4,5] minus 1"));
  }
}

}  // namespace
}  // namespace cleave::interp::testing
