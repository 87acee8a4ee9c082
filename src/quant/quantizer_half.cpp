// Half-precision entry points: float16 and bfloat16 tensors quantized from and dequantized into
// their own 16-bit values, through the scalar reference kernels here or the AVX2 ones.
#include <cpuid.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "proto/byte_order.h"
#include "quant/kernels.h"
#include "quant/quantizer.h"

namespace atp::quant {
namespace detail {

// IEEE binary16 by its fields (clang 14, which builds the fuzzers, has no _Float16 on x86).
// Every half is a float exactly; a NaN keeps its payload and comes back quiet, as vcvtph2ps
// makes it.
float widen_half(bool brain, std::uint16_t bits) {
  if (brain) return std::bit_cast<float>(std::uint32_t{bits} << 16);
  const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu, mantissa = bits & 0x3FFu;
  if (exponent == 0x1F)
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0));
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

namespace {

// float -> binary16, to nearest even, as vcvtps2ph under _MM_FROUND_TO_NEAREST_INT.
std::uint16_t narrow_to_float16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: quiet, the payload's top bits kept
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // 65520 and up round to infinity
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half (or the least normal)
    // x 2^24 is exact; rounding it to an integer is rounding to the subnormal step.
    const float steps = std::nearbyint(std::bit_cast<float>(magnitude) * 0x1p24f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(steps));
  }
  // Rebias the exponent (127 -> 15) and round the 13 bits dropped to nearest even; a carry
  // into the exponent is the right rounding too.
  const std::uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded >> 13) - (112u << 10)));
}

}  // namespace

std::uint16_t narrow_to_half(bool brain, float value) {
  if (!brain) return narrow_to_float16(value);
  if (std::isnan(value)) return 0x7FC0;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the right
  // rounding too (up to the next binade, or to infinity past bfloat16's largest).
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

bool quantize_half_scalar(bool brain, const std::uint16_t* in, std::size_t n, float scale,
                          std::int32_t max_magnitude, std::uint8_t* out) {
  bool all_representable = true;
  for (std::size_t i = 0; i < n; ++i) {
    const float value = widen_half(brain, in[i]);
    all_representable &= quantize_scalar(&value, 1, scale, max_magnitude, out + 4 * i);
  }
  return all_representable;
}

void dequantize_half_scalar(bool brain, const std::uint8_t* in, std::size_t n, float scale,
                            std::uint16_t* out) {
  const float inverse = 1.0f / scale;  // the same inverse as every other path
  for (std::size_t i = 0; i < n; ++i)
    out[i] = narrow_to_half(brain, static_cast<float>(proto::load_be_i32(in + 4 * i)) * inverse);
}

}  // namespace detail

namespace {

bool half_kernels_run(Isa isa) {
  // CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know "f16c"); the AVX state the
  // OS must save is checked with the AVX2 support below.
  static const bool f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return isa != Isa::scalar && supported(isa) && f16c;
}

const std::uint16_t* halves(const void* p) { return static_cast<const std::uint16_t*>(p); }

}  // namespace

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::float32: return "float32";
    case Precision::float16: return "float16";
    case Precision::bfloat16: return "bfloat16";
  }
  return "unknown";
}

std::size_t bytes_per_value(Precision precision) {
  return precision == Precision::float32 ? 4 : 2;
}

bool quantize_to_wire(Isa isa, Precision precision, const void* in, std::size_t n, float scale,
                      std::int32_t max_magnitude, std::uint8_t* out) {
  if (precision == Precision::float32)
    return quantize_to_wire(isa, static_cast<const float*>(in), n, scale, max_magnitude, out);
  const bool brain = precision == Precision::bfloat16;
  return half_kernels_run(isa)
             ? detail::quantize_half_avx2(brain, halves(in), n, scale, max_magnitude, out)
             : detail::quantize_half_scalar(brain, halves(in), n, scale, max_magnitude, out);
}

void dequantize_from_wire(Isa isa, Precision precision, const std::uint8_t* in, std::size_t n,
                          float scale, void* out) {
  if (precision == Precision::float32)
    return dequantize_from_wire(isa, in, n, scale, static_cast<float*>(out));
  const bool brain = precision == Precision::bfloat16;
  auto* dst = static_cast<std::uint16_t*>(out);
  if (half_kernels_run(isa))
    detail::dequantize_half_avx2(brain, in, n, scale, dst);
  else
    detail::dequantize_half_scalar(brain, in, n, scale, dst);
}

// The overflow path is rare (a fragment with a value no scale can carry): one value at a time.
void floats_to_wire(Precision precision, const void* in, std::size_t n, std::uint8_t* out) {
  if (precision == Precision::float32) return floats_to_wire(static_cast<const float*>(in), n, out);
  const bool brain = precision == Precision::bfloat16;
  for (std::size_t i = 0; i < n; ++i)
    proto::store_be32(out + 4 * i,
                      std::bit_cast<std::uint32_t>(detail::widen_half(brain, halves(in)[i])));
}

void floats_from_wire(Precision precision, const std::uint8_t* in, std::size_t n, void* out) {
  if (precision == Precision::float32) return floats_from_wire(in, n, static_cast<float*>(out));
  const bool brain = precision == Precision::bfloat16;
  auto* dst = static_cast<std::uint16_t*>(out);
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = detail::narrow_to_half(brain, std::bit_cast<float>(proto::load_be32(in + 4 * i)));
}

}  // namespace atp::quant
