// Tests for quant/quantizer.h's half-precision paths (float16, bfloat16). Every one of the 65,536
// bit patterns of each is quantized on every ISA and checked against the float32 path on a
// widening written here; results are checked against a nearest-even rounding written here in
// double arithmetic, not against the kernels' own conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "quant/quantizer.h"

namespace atp::quant {
namespace {

struct Case {
  Isa isa;
  Precision precision;
};

std::string name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.isa)) + "_" + std::string(to_string(info.param.precision));
}

// IEEE binary16 and bfloat16 by their fields, in double (exact for both).
double widen(Precision p, std::uint16_t bits) {
  const bool negative = bits & 0x8000;
  double magnitude;
  if (p == Precision::bfloat16) {
    magnitude = std::fabs(static_cast<double>(std::bit_cast<float>(std::uint32_t{bits} << 16)));
  } else {
    const int exponent = (bits >> 10) & 0x1F;
    const int mantissa = bits & 0x3FF;
    if (exponent == 0x1F) magnitude = mantissa ? std::nan("") : INFINITY;
    else if (exponent == 0) magnitude = std::ldexp(mantissa, -24);
    else magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

// `x` rounded to the nearest value of `p`, ties to even, as a double (infinity past the top).
double round_to(Precision p, double x) {
  const int mantissa_bits = p == Precision::bfloat16 ? 7 : 10;
  const int min_exponent = p == Precision::bfloat16 ? -126 : -14;
  const double largest = p == Precision::bfloat16 ? std::ldexp(255.0, 120) : 65504.0;
  const double a = std::fabs(x);
  if (a == 0 || std::isnan(a)) return x;
  const int exponent = std::max(static_cast<int>(std::floor(std::log2(a))), min_exponent);
  const double step = std::ldexp(1.0, exponent - mantissa_bits);
  const double r = std::nearbyint(a / step) * step;  // nearest even in the default mode
  const double result = r > largest ? INFINITY : r;
  return std::signbit(x) ? -result : result;
}

class HalfPrecision : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!supported(GetParam().isa)) GTEST_SKIP() << to_string(GetParam().isa) << " not supported";
  }
  Isa isa() const { return GetParam().isa; }
  Precision precision() const { return GetParam().precision; }
};

std::vector<std::uint16_t> every_pattern() {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  return all;
}

TEST_P(HalfPrecision, EveryValueQuantizesAsItsFloat32Widening) {
  const std::vector<std::uint16_t> halves = every_pattern();
  std::vector<float> widened(halves.size());
  for (std::size_t i = 0; i < halves.size(); ++i)
    widened[i] = static_cast<float>(widen(precision(), halves[i]));
  for (float scale : {1.0f, 1024.0f, 65536.0f, 0.25f}) {
    for (std::int32_t bound : {kAnyMagnitude, 1 << 20, 3}) {
      // Back-to-back windows of each length: loops and tails both see every value.
      for (std::size_t n : {1, 7, 8, 15, 16, 17, 64, 73, 256}) {
        for (std::size_t at = 0; at < halves.size(); at += n) {
          const std::size_t count = std::min(n, halves.size() - at);
          std::vector<std::uint8_t> got(4 * count + 8, 0xAB), want(4 * count);
          const bool ok = quantize_to_wire(isa(), precision(), halves.data() + at, count, scale,
                                           bound, got.data() + 4);
          const bool want_ok = quantize_to_wire(Isa::scalar, widened.data() + at, count, scale,
                                                bound, want.data());
          ASSERT_EQ(ok, want_ok) << "at " << at << " n " << count << " scale " << scale;
          ASSERT_EQ(0, std::memcmp(got.data() + 4, want.data(), want.size())) << "at " << at;
          for (int guard : {0, 1, 2, 3}) {
            ASSERT_EQ(got[guard], 0xAB);
            ASSERT_EQ(got[got.size() - 1 - guard], 0xAB);
          }
        }
      }
    }
  }
}

TEST_P(HalfPrecision, ResultsAreTheFloat32ResultRoundedToNearestEven) {
  std::mt19937 random(7);
  // 2^26: results down to 2^-26, through float16's subnormals (steps of 2^-24) and their ties.
  for (float scale : {1.0f, 1024.0f, 1.0f / 64, 67108864.0f}) {
    for (std::size_t n : {1, 5, 8, 16, 23, 64, 257}) {
      std::vector<std::uint8_t> wire(4 * n);
      std::vector<std::int32_t> q(n);
      for (std::size_t i = 0; i < n; ++i) {
        // Integers of every size, ties between neighbouring halves included.
        const int width = static_cast<int>(random() % 32);
        q[i] = static_cast<std::int32_t>(random() >> (31 - width)) * (random() % 2 ? 1 : -1);
        if (i % 5 == 0) q[i] = 2049 + 2 * static_cast<std::int32_t>(random() % 100);  // fp16 ties
        const auto u = static_cast<std::uint32_t>(q[i]);
        wire[4 * i] = u >> 24, wire[4 * i + 1] = u >> 16, wire[4 * i + 2] = u >> 8, wire[4 * i + 3] = u;
      }
      std::vector<std::uint16_t> out(n + 2, 0xBEEF);
      dequantize_from_wire(isa(), precision(), wire.data(), n, scale, out.data() + 1);
      ASSERT_EQ(out.front(), 0xBEEF);
      ASSERT_EQ(out.back(), 0xBEEF);
      for (std::size_t i = 0; i < n; ++i) {
        const float as_float32 = static_cast<float>(q[i]) * (1.0f / scale);
        ASSERT_EQ(widen(precision(), out[i + 1]), round_to(precision(), as_float32))
            << "q " << q[i] << " scale " << scale;
      }
    }
  }
}

TEST_P(HalfPrecision, OverflowPathCarriesEveryValueAsFloat32AndBack) {
  const std::vector<std::uint16_t> halves = every_pattern();
  std::vector<std::uint8_t> wire(4 * halves.size());
  floats_to_wire(precision(), halves.data(), halves.size(), wire.data());
  std::vector<std::uint16_t> back(halves.size());
  floats_from_wire(precision(), wire.data(), halves.size(), back.data());
  for (std::size_t i = 0; i < halves.size(); ++i) {
    const double value = widen(precision(), halves[i]);
    const auto word = static_cast<std::uint32_t>(wire[4 * i]) << 24 | wire[4 * i + 1] << 16 |
                      wire[4 * i + 2] << 8 | wire[4 * i + 3];
    const float on_wire = std::bit_cast<float>(word);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(on_wire) && std::isnan(widen(precision(), back[i]))) << i;
    } else {
      ASSERT_EQ(static_cast<double>(on_wire), value) << i;
      ASSERT_EQ(back[i], halves[i]) << i;
    }
  }
}

TEST(HalfPrecisionNaN, BfloatNaNResultIsTorchsQuietNaN) {
  const std::uint8_t nan_word[4] = {0xFF, 0xC0, 0x12, 0x34};  // a negative NaN with a payload
  std::uint16_t out = 0;
  floats_from_wire(Precision::bfloat16, nan_word, 1, &out);
  EXPECT_EQ(out, 0x7FC0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryIsa, HalfPrecision,
    ::testing::Values(Case{Isa::scalar, Precision::float16}, Case{Isa::scalar, Precision::bfloat16},
                      Case{Isa::avx2, Precision::float16}, Case{Isa::avx2, Precision::bfloat16},
                      Case{Isa::avx512, Precision::float16},
                      Case{Isa::avx512, Precision::bfloat16}),
    name);

}  // namespace
}  // namespace atp::quant
