#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/half.h"
#include "common/half_rows.h"

namespace kvstream {
namespace {

TEST(Half, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half bits " << h;
  }
}

// The row conversions (F16C where the CPU has it) agree with the scalar ones bit for bit, NaN payloads
// aside, on every half and on random floats across the whole range, with a tail shorter than a vector.
TEST(HalfRows, AgreeWithTheScalarConversions) {
  std::vector<uint16_t> halves(65536 + 5);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats(halves.size());
  HalfRowToFloat(halves.data(), floats.data(), static_cast<int64_t>(halves.size()));
  for (size_t i = 0; i < halves.size(); ++i) {
    const float want = HalfToFloat(halves[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(floats[i])) << i;
    } else {
      ASSERT_EQ(FloatBits(floats[i]), FloatBits(want)) << "half bits " << halves[i];
    }
  }
  std::mt19937 rng(7);
  std::vector<float> in(100003);
  for (float& f : in) f = BitsToFloat(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> out(in.size());
  FloatRowToHalf(in.data(), out.data(), static_cast<int64_t>(in.size()));
  // Every bit agrees, NaN payloads included (the GPU decoder's stores are FloatToHalf's).
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], FloatToHalf(in[i])) << "float bits " << FloatBits(in[i]);
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to the even mantissa, 1.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02u);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00u);  // overflows to infinity
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000u);   // halfway to the smallest subnormal: even = 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001u);
}

TEST(BFloat16, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToBFloat16(f), b);
  }
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3f808000u)), 0x3f80u);  // tie, even stays
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x3f818000u)), 0x3f82u);  // tie, odd rounds up
}

}  // namespace
}  // namespace kvstream
