// Half-precision entry points: float16 and bfloat16 tensors quantized from and dequantized into
// their own 16-bit values, through the scalar reference kernels here or the AVX2 ones.
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "proto/byte_order.h"
#include "quant/kernels.h"
#include "quant/quantizer.h"

namespace atp::quant {
namespace detail {

float widen_half(bool brain, std::uint16_t bits) {
  if (brain) return std::bit_cast<float>(std::uint32_t{bits} << 16);
  return static_cast<float>(std::bit_cast<_Float16>(bits));  // exact: every half is a float
}

std::uint16_t narrow_to_half(bool brain, float value) {
  if (!brain) return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));  // nearest even
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
  static const bool f16c = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") != 0;
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

bool quantize_to_wire(Precision precision, const void* in, std::size_t n, float scale,
                      std::int32_t max_magnitude, std::uint8_t* out) {
  if (precision == Precision::float32)
    return quantize_to_wire(static_cast<const float*>(in), n, scale, max_magnitude, out);
  return quantize_to_wire(best_isa(), precision, in, n, scale, max_magnitude, out);
}

void dequantize_from_wire(Precision precision, const std::uint8_t* in, std::size_t n, float scale,
                          void* out) {
  if (precision == Precision::float32)
    return dequantize_from_wire(in, n, scale, static_cast<float*>(out));
  dequantize_from_wire(best_isa(), precision, in, n, scale, out);
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
