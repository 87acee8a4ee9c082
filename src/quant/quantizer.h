#pragma once
// Float <-> scaled int32 conversion for gradient fragments, straight to and from the wire.
//
// Switches add integers, so a worker multiplies each float by a per-job scale and rounds to the
// nearest int32 (ties to even). Payloads travel big-endian (network order, what a P4 parser
// sees), so the conversion and the byte swap happen in one pass.
//
// Definition (every ISA path gives bit-identical output):
//   y = x * scale                    (IEEE single multiply, round to nearest even)
//   in_range(y)  <=>  |y| < 2^31 and y is not NaN
//   q = in_range(y) ? round_half_even(y) : INT32_MIN
//   representable  <=>  in_range(y) and |q| <= max_magnitude
//   dequantize(q) = float(q) * (1.0f / scale)
// A worker passes max_magnitude = sum_safe_magnitude(workers): then no sum of any subset of the
// job's values can leave int32, in whatever order switches add them.
// NaN, +-Inf and values whose scaled magnitude reaches 2^31 are not representable: the fragment
// must then travel as float32 (see the worker), so a non-finite gradient gives the IEEE float sum
// at the parameter server, exactly like a float allreduce would.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace atp::quant {

enum class Isa { scalar, avx2, avx512 };

std::string_view to_string(Isa isa);

// The widest ISA this CPU supports (checked once at run time).
Isa best_isa();

// True if this CPU can run `isa`.
bool supported(Isa isa);

// Quantizes n floats into n big-endian int32 at `out` (4n bytes).
// Returns true if every value was representable; false means at least one was not and the
// fragment must be sent as float32 instead.
bool quantize_to_wire(const float* in, std::size_t n, float scale, std::uint8_t* out);
bool quantize_to_wire(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                      std::uint8_t* out);

// No bound beyond int32 itself.
inline constexpr std::int32_t kAnyMagnitude = 2147483647;

// The largest |q| per worker for which `workers` of them always sum within int32.
std::int32_t sum_safe_magnitude(int workers);

// Reads n big-endian int32 from `in` and writes float(q) * (1/scale) to `out`.
void dequantize_from_wire(const std::uint8_t* in, std::size_t n, float scale, float* out);

// Same, on an explicitly chosen ISA (tests and benchmarks compare the paths).
bool quantize_to_wire(Isa isa, const float* in, std::size_t n, float scale, std::uint8_t* out);
bool quantize_to_wire(Isa isa, const float* in, std::size_t n, float scale,
                      std::int32_t max_magnitude, std::uint8_t* out);
void dequantize_from_wire(Isa isa, const std::uint8_t* in, std::size_t n, float scale, float* out);

// Float32 payloads (the overflow path): host floats to big-endian bytes and back, bit for bit.
void floats_to_wire(const float* in, std::size_t n, std::uint8_t* out);
void floats_from_wire(const std::uint8_t* in, std::size_t n, float* out);

// n 32-bit words between host order and big-endian, either way (the same byte reversal): a
// software switch's registers to and from a packet's values.
void swap_words(const void* in, std::size_t n, void* out);

// Half-precision tensors, quantized straight from their 16-bit values (no float32 copy of the
// tensor): each value is widened exactly to float32 and then follows the definition above, so
// a half tensor puts on the wire exactly what its float32 copy would. Results are the float32
// dequantize(q) rounded once to the tensor's precision, to nearest even (what converting the
// float32 result would give; a bfloat16 NaN becomes 0x7FC0, as torch's conversion makes it).
enum class Precision : std::uint8_t { float32, float16, bfloat16 };

std::string_view to_string(Precision precision);
std::size_t bytes_per_value(Precision precision);

// On a chosen ISA (avx512 runs the AVX2 kernels: a half-precision vector is 8 values either
// way, and the tensor's bytes, not the arithmetic, set the pace).
bool quantize_to_wire(Isa isa, Precision precision, const void* in, std::size_t n, float scale,
                      std::int32_t max_magnitude, std::uint8_t* out);
void dequantize_from_wire(Isa isa, Precision precision, const std::uint8_t* in, std::size_t n,
                          float scale, void* out);

// On the best ISA. Inline, so that a float32 tensor goes straight to the float32 entry points:
// the worker calls these for every fragment, and float32 is its common case.
inline bool quantize_to_wire(Precision precision, const void* in, std::size_t n, float scale,
                             std::int32_t max_magnitude, std::uint8_t* out) {
  if (precision == Precision::float32) [[likely]]
    return quantize_to_wire(static_cast<const float*>(in), n, scale, max_magnitude, out);
  return quantize_to_wire(best_isa(), precision, in, n, scale, max_magnitude, out);
}
inline void dequantize_from_wire(Precision precision, const std::uint8_t* in, std::size_t n,
                                 float scale, void* out) {
  if (precision == Precision::float32) [[likely]]
    return dequantize_from_wire(in, n, scale, static_cast<float*>(out));
  dequantize_from_wire(best_isa(), precision, in, n, scale, out);
}

// The float32 payloads of the overflow path, from and to values of `precision`.
void floats_to_wire(Precision precision, const void* in, std::size_t n, std::uint8_t* out);
void floats_from_wire(Precision precision, const std::uint8_t* in, std::size_t n, void* out);

// True if adding `workers` values of magnitude up to `max_abs` could leave int32.
bool sum_may_overflow(std::int64_t max_abs, int workers);

// The largest power-of-two scale for which `workers` gradients of magnitude up to
// `max_abs_value` can be summed in int32 without overflow. Powers of two keep
// x * scale and the inverse exact in floating point.
float choose_scale(float max_abs_value, int workers);

}  // namespace atp::quant
