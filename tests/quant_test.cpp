// Tests for quant/quantizer.h. Every ISA path is checked against an independent reference
// written here (not against itself), and against the scalar path byte for byte.
#include "quant/quantizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace atp::quant {
namespace {

constexpr std::int32_t kIntMin = std::numeric_limits<std::int32_t>::min();
constexpr float kTwoPow31 = 2147483648.0f;
constexpr float kBelowTwoPow31 = 2147483520.0f;  // Largest float below 2^31.
constexpr float kInf = std::numeric_limits<float>::infinity();

std::int32_t read_be(const std::uint8_t* p) {
  return static_cast<std::int32_t>(std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 |
                                   std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]});
}

void write_be(std::uint8_t* p, std::int32_t v) {
  const auto u = static_cast<std::uint32_t>(v);
  p[0] = static_cast<std::uint8_t>(u >> 24);
  p[1] = static_cast<std::uint8_t>(u >> 16);
  p[2] = static_cast<std::uint8_t>(u >> 8);
  p[3] = static_cast<std::uint8_t>(u);
}

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t to_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// The header's definition, rounding by hand rather than through the FP rounding mode.
std::int32_t reference_quantize(float x, float scale, bool& representable) {
  const float y = x * scale;
  if (std::isnan(y) || std::fabs(y) >= kTwoPow31) {
    representable = false;
    return kIntMin;
  }
  const double down = std::floor(static_cast<double>(y));
  const double frac = static_cast<double>(y) - down;
  const bool down_is_even = std::fmod(down, 2.0) == 0.0;
  const double r = frac < 0.5 ? down : frac > 0.5 ? down + 1 : (down_is_even ? down : down + 1);
  return static_cast<std::int32_t>(r);
}

// Quantizes `values` on `isa` into a guarded output buffer at byte offset `out_offset`;
// fails the test if any guard byte around the 4n output bytes changes.
struct Quantized {
  bool ok = false;
  std::vector<std::int32_t> q;
  std::vector<std::uint8_t> bytes;
};

constexpr std::uint8_t kGuard = 0xA5;
constexpr std::size_t kSlack = 64;

Quantized quantize_guarded(Isa isa, const float* in, std::size_t n, float scale,
                           std::size_t out_offset = 0) {
  std::vector<std::uint8_t> buffer(4 * n + out_offset + kSlack, kGuard);
  std::uint8_t* out = buffer.data() + out_offset;
  Quantized r;
  r.ok = quantize_to_wire(isa, in, n, scale, out);
  for (std::size_t i = 0; i < out_offset; ++i) EXPECT_EQ(buffer[i], kGuard) << "before, " << i;
  for (std::size_t i = out_offset + 4 * n; i < buffer.size(); ++i)
    EXPECT_EQ(buffer[i], kGuard) << "after output, byte " << i;
  r.bytes.assign(out, out + 4 * n);
  for (std::size_t i = 0; i < n; ++i) r.q.push_back(read_be(out + 4 * i));
  return r;
}

Quantized quantize_guarded(Isa isa, const std::vector<float>& in, float scale) {
  return quantize_guarded(isa, in.data(), in.size(), scale);
}

// ---------------------------------------------------------------------------------------------
// ISA selection.

TEST(QuantIsa, NamesAndBestIsaIsSupported) {
  EXPECT_EQ(to_string(Isa::scalar), "scalar");
  EXPECT_EQ(to_string(Isa::avx2), "avx2");
  EXPECT_EQ(to_string(Isa::avx512), "avx512");
  EXPECT_TRUE(supported(Isa::scalar));
  EXPECT_TRUE(supported(best_isa()));
  // best_isa() is the widest supported path.
  const Isa widest = supported(Isa::avx512) ? Isa::avx512
                     : supported(Isa::avx2)   ? Isa::avx2
                                              : Isa::scalar;
  EXPECT_EQ(best_isa(), widest);
}

TEST(QuantIsa, SupportMatchesCpu) {
  EXPECT_EQ(supported(Isa::avx2), static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(supported(Isa::avx512), __builtin_cpu_supports("avx512f") &&
                                        __builtin_cpu_supports("avx512bw"));
}

TEST(QuantIsa, ExplicitIsaRunsEvenIfUnsupported) {
  // Unsupported requests fall back instead of faulting; the output is the same either way.
  const std::vector<float> in = {1.0f, -2.5f, 3.5f, kInf};
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    const Quantized r = quantize_guarded(isa, in, 1.0f);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.q, (std::vector<std::int32_t>{1, -2, 4, kIntMin})) << to_string(isa);
  }
}

// ---------------------------------------------------------------------------------------------
// Per-ISA behaviour: every test below runs on scalar, AVX2 and AVX-512 (skipped if unsupported).

class QuantIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!supported(GetParam())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
  Isa isa() const { return GetParam(); }
};

// Lengths that put a value in each part of every ISA's loops: the AVX2 quantizer's 32-value
// step, its 8-value step and its masked tail (dequantize: a scalar tail), the AVX-512 masked
// tail. The special value is tested at every position of buffers of these lengths.
constexpr std::size_t kProbeLengths[] = {1, 7, 8, 9, 16, 17, 31, 33, 39, 40, 71};

// Places `x` at every position of zero-filled buffers and checks the flag and outputs.
void expect_single(Isa isa, float x, float scale, std::int32_t expected_q, bool expected_ok) {
  for (std::size_t n : kProbeLengths) {
    for (std::size_t pos = 0; pos < n; ++pos) {
      std::vector<float> in(n, 0.0f);
      in[pos] = x;
      const Quantized r = quantize_guarded(isa, in, scale);
      ASSERT_EQ(r.ok, expected_ok) << "x=" << x << " n=" << n << " pos=" << pos;
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(r.q[i], i == pos ? expected_q : 0) << "x=" << x << " n=" << n << " i=" << i;
    }
  }
}

TEST_P(QuantIsaTest, RoundsHalfToEven) {
  const std::vector<float> ties = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -3.5f, 0.49999997f};
  const std::vector<std::int32_t> expected = {0, 2, 2, 0, -2, -2, 4, -4, 0};
  for (std::size_t i = 0; i < ties.size(); ++i) {
    expect_single(isa(), ties[i], 1.0f, expected[i], true);
  }
  // Ties created by the scale: 5 * 0.5 = 2.5 -> 2, 7 * 0.5 = 3.5 -> 4.
  expect_single(isa(), 5.0f, 0.5f, 2, true);
  expect_single(isa(), 7.0f, 0.5f, 4, true);
}

TEST_P(QuantIsaTest, BoundaryAroundTwoPow31) {
  expect_single(isa(), kBelowTwoPow31, 1.0f, 2147483520, true);
  expect_single(isa(), -kBelowTwoPow31, 1.0f, -2147483520, true);
  expect_single(isa(), kTwoPow31, 1.0f, kIntMin, false);
  // -2^31 fits in int32 but is excluded by the definition (|y| < 2^31), keeping the range
  // symmetric; it must be flagged on every path.
  expect_single(isa(), -kTwoPow31, 1.0f, kIntMin, false);
  expect_single(isa(), 1.0f, kTwoPow31, kIntMin, false);  // The scaled value decides.
  expect_single(isa(), 0.5f, kTwoPow31, 1073741824, true);
  expect_single(isa(), FLT_MAX, 1.0f, kIntMin, false);
}

TEST_P(QuantIsaTest, NonFiniteIsFlagged) {
  expect_single(isa(), std::numeric_limits<float>::quiet_NaN(), 1.0f, kIntMin, false);
  expect_single(isa(), -std::numeric_limits<float>::quiet_NaN(), 1.0f, kIntMin, false);
  expect_single(isa(), from_bits(0x7F800001u), 1.0f, kIntMin, false);  // Signalling NaN.
  expect_single(isa(), kInf, 1.0f, kIntMin, false);
  expect_single(isa(), -kInf, 1.0f, kIntMin, false);
  expect_single(isa(), kInf, 1e-30f, kIntMin, false);  // Inf stays Inf whatever the scale.
}

TEST_P(QuantIsaTest, ZerosAndDenormals) {
  expect_single(isa(), -0.0f, 1.0f, 0, true);
  expect_single(isa(), std::numeric_limits<float>::denorm_min(), 1.0f, 0, true);
  expect_single(isa(), 3.0f, 1e-30f, 0, true);
}

TEST_P(QuantIsaTest, WireBytesAreBigEndian) {
  // 0x01020304 = 16909060 is exactly representable as a float (it is even, above 2^24).
  const std::vector<float> in = {16909060.0f, 1.0f, -2.0f, 258.0f};
  const Quantized r = quantize_guarded(isa(), in, 1.0f);
  ASSERT_TRUE(r.ok);
  const std::vector<std::uint8_t> expected = {0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x01,
                                              0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x00, 0x01, 0x02};
  EXPECT_EQ(r.bytes, expected);

  const std::vector<std::uint8_t> wire = {0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE,
                                          0x80, 0x00, 0x00, 0x00};
  std::vector<float> out(3);
  dequantize_from_wire(isa(), wire.data(), 3, 2.0f, out.data());
  EXPECT_EQ(out, (std::vector<float>{129.0f, -1.0f, -1073741824.0f}));
}

TEST_P(QuantIsaTest, RoundTripWithinHalfStep) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int workers = 8;
  const float scale = choose_scale(1.0f, workers);
  ASSERT_EQ(scale, 0x1p27f);
  for (std::size_t n : {0, 1, 5, 15, 16, 17, 100, 1000, 4099}) {
    std::vector<float> in(n);
    for (float& x : in) x = value(rng);
    if (n > 1) in[1] = 1.0f;  // The extreme value the scale was chosen for.
    if (n > 2) in[2] = -1.0f;
    const Quantized r = quantize_guarded(isa(), in, scale);
    ASSERT_TRUE(r.ok) << n;
    std::vector<float> back(n);
    dequantize_from_wire(isa(), r.bytes.data(), n, scale, back.data());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(back[i] - in[i]), 0.5f / scale) << "n=" << n << " i=" << i;
      // The sum of `workers` such values stays inside int32.
      ASSERT_LE(std::int64_t{r.q[i]} * workers, std::numeric_limits<std::int32_t>::max());
    }
  }
}

TEST_P(QuantIsaTest, UnalignedPointers) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  const float scale = 0x1p10f;
  constexpr std::size_t n = 77;
  std::vector<float> storage(n + 32);
  for (float& x : storage) x = value(rng);
  for (std::size_t in_offset = 0; in_offset < 16; ++in_offset) {
    for (std::size_t out_offset = 0; out_offset < 8; ++out_offset) {
      const float* in = storage.data() + in_offset;
      const Quantized r = quantize_guarded(isa(), in, n, scale, out_offset);
      ASSERT_TRUE(r.ok);
      for (std::size_t i = 0; i < n; ++i) {
        bool ok = true;
        ASSERT_EQ(r.q[i], reference_quantize(in[i], scale, ok)) << in_offset << "/" << out_offset;
      }
      // Dequantize from an odd byte address into a float array that is not vector-aligned.
      std::vector<std::uint8_t> wire(4 * n + out_offset);
      std::memcpy(wire.data() + out_offset, r.bytes.data(), 4 * n);
      std::vector<float> back(n + 16);
      dequantize_from_wire(isa(), wire.data() + out_offset, n, scale, back.data() + in_offset);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(back[in_offset + i], static_cast<float>(r.q[i]) * (1.0f / scale));
    }
  }
}

// Generates inputs that exercise every branch of the definition for a given scale.
class InputGenerator {
 public:
  explicit InputGenerator(std::uint32_t seed) : rng_(seed) {}

  float scale() {
    switch (pick(3)) {
      case 0: return std::ldexp(1.0f, static_cast<int>(pick(61)) - 20);  // 2^-20 .. 2^40
      case 1: return std::uniform_real_distribution<float>(1e-3f, 1e9f)(rng_);
      default: return 1.0f;
    }
  }

  // Values well inside the representable range for `scale`.
  float clean(float scale) {
    return std::uniform_real_distribution<float>(-0.99f, 0.99f)(rng_) * (kTwoPow31 / scale);
  }

  float any(float scale) {
    const std::uint32_t category = pick(100);
    const float sign = pick(2) ? 1.0f : -1.0f;
    if (category < 60) return clean(scale);
    if (category < 72) {  // Ties after scaling (exact when scale is a power of two).
      return (static_cast<float>(static_cast<int>(pick(2000001)) - 1000000) + 0.5f) / scale;
    }
    if (category < 80) {  // Around the 2^31 boundary, in scaled units.
      const float boundary[] = {kBelowTwoPow31, kTwoPow31, 2147483904.0f};
      return sign * boundary[pick(3)] / scale;
    }
    if (category < 88) return from_bits(static_cast<std::uint32_t>(rng_()));  // Any bits.
    if (category < 94) {
      const float special[] = {0.0f, std::numeric_limits<float>::denorm_min(), FLT_MIN, kInf};
      return sign * special[pick(4)];
    }
    return from_bits((pick(2) ? 0xFF800000u : 0x7F800000u) | (1u + pick(0x7FFFFF)));  // NaN.
  }

  std::uint32_t pick(std::uint32_t count) {
    return std::uniform_int_distribution<std::uint32_t>(0, count - 1)(rng_);
  }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

TEST_P(QuantIsaTest, MatchesReferenceAndScalarOnRandomBuffers) {
  InputGenerator gen(20240601);
  int clean_buffers = 0, flagged_buffers = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t n = gen.pick(1001);
    const float scale = gen.scale();
    const bool clean = gen.pick(2) == 0;
    const std::size_t in_offset = gen.pick(16);
    std::vector<float> storage(n + 16);
    float* in = storage.data() + in_offset;
    for (std::size_t i = 0; i < n; ++i) in[i] = clean ? gen.clean(scale) : gen.any(scale);
    SCOPED_TRACE("trial " + std::to_string(trial) + " n=" + std::to_string(n) +
                 " scale=" + std::to_string(scale));

    bool expected_ok = true;
    std::vector<std::int32_t> expected(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = reference_quantize(in[i], scale, expected_ok);

    const Quantized r = quantize_guarded(isa(), in, n, scale, gen.pick(8));
    ASSERT_EQ(r.ok, expected_ok);
    ASSERT_EQ(r.q, expected);
    const Quantized s = quantize_guarded(Isa::scalar, in, n, scale);
    ASSERT_EQ(r.bytes, s.bytes);
    ASSERT_EQ(r.ok, s.ok);
    (expected_ok ? clean_buffers : flagged_buffers)++;
  }
  // Both outcomes must actually have been exercised.
  EXPECT_GT(clean_buffers, 100);
  EXPECT_GT(flagged_buffers, 100);
}

TEST_P(QuantIsaTest, DequantizeMatchesReferenceOnRandomWords) {
  InputGenerator gen(777);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = gen.pick(1001);
    const float scale = gen.scale();
    const std::size_t in_offset = gen.pick(8), out_offset = gen.pick(16);
    std::vector<std::uint8_t> wire(4 * n + in_offset);
    std::vector<std::int32_t> q(n);
    for (std::size_t i = 0; i < n; ++i) {
      q[i] = gen.pick(50) == 0 ? kIntMin : static_cast<std::int32_t>(gen.rng()());
      write_be(wire.data() + in_offset + 4 * i, q[i]);
    }
    // Guard floats after the output catch stray (e.g. unmasked tail) stores.
    std::vector<float> out(n + out_offset + 16, -7.0f);
    dequantize_from_wire(isa(), wire.data() + in_offset, n, scale, out.data() + out_offset);
    const float inverse = 1.0f / scale;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(to_bits(out[out_offset + i]), to_bits(static_cast<float>(q[i]) * inverse))
          << "trial " << trial << " i=" << i;
    }
    for (std::size_t i = 0; i < out_offset; ++i) ASSERT_EQ(out[i], -7.0f);
    for (std::size_t i = out_offset + n; i < out.size(); ++i) ASSERT_EQ(out[i], -7.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, QuantIsaTest,
                         ::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           return std::string(to_string(info.param));
                         });

// ---------------------------------------------------------------------------------------------
// Float32 wire format (the overflow path).

TEST(FloatWire, KnownBytes) {
  const std::vector<float> in = {1.0f, -2.0f, from_bits(0x7FA00001u)};
  std::vector<std::uint8_t> wire(12);
  floats_to_wire(in.data(), in.size(), wire.data());
  EXPECT_EQ(wire, (std::vector<std::uint8_t>{0x3F, 0x80, 0x00, 0x00, 0xC0, 0x00, 0x00, 0x00,
                                             0x7F, 0xA0, 0x00, 0x01}));
}

TEST(FloatWire, RoundTripIsBitExactIncludingNaNPayloads) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(0, 1000)(rng);
    const std::size_t offset = trial % 4;  // Odd byte addresses for the wire side.
    std::vector<std::uint32_t> bits(n);
    for (auto& b : bits) b = static_cast<std::uint32_t>(rng());
    // Make sure NaNs with payloads (quiet and signalling, both signs) are present.
    const std::uint32_t nans[] = {0x7FC00001u, 0x7F800001u, 0xFFBFFFFFu, 0xFFC12345u};
    for (std::size_t i = 0; i < n && i < 4; ++i) bits[n - 1 - i] = nans[i];
    std::vector<float> in(n);
    std::memcpy(in.data(), bits.data(), 4 * n);

    std::vector<std::uint8_t> wire(4 * n + offset + kSlack, kGuard);
    floats_to_wire(in.data(), n, wire.data() + offset);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<std::uint32_t>(read_be(wire.data() + offset + 4 * i)), bits[i]);
    for (std::size_t i = offset + 4 * n; i < wire.size(); ++i) ASSERT_EQ(wire[i], kGuard);

    std::vector<float> back(n);
    floats_from_wire(wire.data() + offset, n, back.data());
    ASSERT_EQ(std::memcmp(back.data(), bits.data(), 4 * n), 0) << "trial " << trial;
  }
}

// ---------------------------------------------------------------------------------------------
// Overflow detection and scale choice.

TEST(SumMayOverflow, Edges) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  EXPECT_FALSE(sum_may_overflow(0, 1000));
  EXPECT_FALSE(sum_may_overflow(kMax, 1));
  EXPECT_TRUE(sum_may_overflow(kMax + 1, 1));  // 2^31
  EXPECT_FALSE(sum_may_overflow((std::int64_t{1} << 30) - 1, 2));
  EXPECT_TRUE(sum_may_overflow(std::int64_t{1} << 30, 2));  // Exactly 2^31.
  EXPECT_FALSE(sum_may_overflow(715827882, 3));             // 2147483646
  EXPECT_TRUE(sum_may_overflow(715827883, 3));              // 2147483649
  EXPECT_FALSE(sum_may_overflow(1, std::numeric_limits<int>::max()));
  EXPECT_TRUE(sum_may_overflow(2, std::numeric_limits<int>::max()));
  EXPECT_TRUE(sum_may_overflow(std::int64_t{1} << 31, std::numeric_limits<int>::max()));
  EXPECT_TRUE(sum_may_overflow(std::numeric_limits<std::int64_t>::max(), 1));
}

TEST(ChooseScale, KnownValues) {
  EXPECT_EQ(choose_scale(1.0f, 1), 0x1p30f);  // 2^31 itself would reach the bound.
  EXPECT_EQ(choose_scale(1.5f, 1), 0x1p30f);
  EXPECT_EQ(choose_scale(2.0f, 1), 0x1p29f);
  EXPECT_EQ(choose_scale(3.0f, 1), 0x1p29f);
  EXPECT_EQ(choose_scale(1.0f, 2), 0x1p29f);
  EXPECT_EQ(choose_scale(1.0f, 3), 0x1p29f);
  EXPECT_EQ(choose_scale(1.0f, 4), 0x1p28f);
  EXPECT_EQ(choose_scale(-1.0f, 1), 0x1p30f);  // Sign is ignored.
  EXPECT_EQ(choose_scale(0x1p30f, 1), 1.0f);
  EXPECT_EQ(choose_scale(FLT_MAX, 1), 0x1p-97f);
  // Rounding guard: 2^23 - 0.5 times 256 is below 2^31, but rounds to 2^23 and 256 * 2^23
  // overflows, so the scale drops to 1/2.
  EXPECT_EQ(choose_scale(0x1p23f - 0.5f, 256), 0.5f);
}

TEST(ChooseScale, DegenerateInputs) {
  EXPECT_EQ(choose_scale(0.0f, 4), 1.0f);
  EXPECT_EQ(choose_scale(-0.0f, 4), 1.0f);
  EXPECT_EQ(choose_scale(kInf, 4), 1.0f);
  EXPECT_EQ(choose_scale(-kInf, 4), 1.0f);
  EXPECT_EQ(choose_scale(std::numeric_limits<float>::quiet_NaN(), 4), 1.0f);
  EXPECT_EQ(choose_scale(1.0f, 0), choose_scale(1.0f, 1));  // workers < 1 treated as 1.
  // Clamped: tiny values would want scales beyond 2^126.
  EXPECT_EQ(choose_scale(std::numeric_limits<float>::denorm_min(), 1), 0x1p126f);
  EXPECT_EQ(choose_scale(1e-30f, 1), 0x1p126f);
}

TEST(ChooseScale, AlwaysAFinitePowerOfTwo) {
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const float m = from_bits(static_cast<std::uint32_t>(rng()));
    const int workers = 1 + static_cast<int>(rng() % 100000);
    const float s = choose_scale(m, workers);
    int e = 0;
    ASSERT_TRUE(std::isfinite(s) && s > 0.0f) << m;
    ASSERT_EQ(std::frexp(s, &e), 0.5f) << m;
    ASSERT_GE(s, 0x1p-126f);
    ASSERT_LE(s, 0x1p126f);
  }
}

// The defining property, checked with exact (64-bit mantissa) arithmetic: s is a power of two,
// the scaled maximum and its rounded integer both sum safely, and 2s would not.
TEST(ChooseScale, LargestSafePowerOfTwo) {
  std::mt19937 rng(11);
  auto safe = [](float m, float s, long double workers) {
    const long double y = static_cast<long double>(m) * s;  // Exact.
    if (!(y * workers < 2147483648.0L)) return false;
    return !sum_may_overflow(static_cast<std::int64_t>(std::nearbyint(y)),
                             static_cast<int>(workers));
  };
  for (int i = 0; i < 20000; ++i) {
    const float m = std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(rng),
                               std::uniform_int_distribution<int>(-60, 60)(rng));
    const int workers = i % 4 == 0 ? 1 << (rng() % 31) : 1 + static_cast<int>(rng() % 2000);
    const float s = choose_scale(m, workers);
    ASSERT_TRUE(safe(m, s, workers)) << m << " x " << workers << " -> " << s;
    if (s < 0x1p126f) {
      ASSERT_FALSE(safe(m, 2 * s, workers)) << m << " x " << workers;
    }
    // And the quantizer agrees that m and -m are representable at that scale.
    const float pair[] = {m, -m};
    std::uint8_t wire[8];
    ASSERT_TRUE(quantize_to_wire(pair, 2, s, wire));
  }
}

}  // namespace
}  // namespace atp::quant
