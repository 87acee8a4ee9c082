// Portable reference kernels. They spell out the definition in quantizer.h element by element;
// the SIMD paths must match them bit for bit, and the AVX2 path uses them for its tails.
#include <cmath>
#include <cstring>
#include <limits>

#include "proto/byte_order.h"
#include "quant/kernels.h"

namespace atp::quant::detail {

bool quantize_scalar(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                     std::uint8_t* out) {
  bool all_representable = true;
  for (std::size_t i = 0; i < n; ++i) {
    const float y = in[i] * scale;
    std::int32_t q;
    // Written as "fabs(y) < 2^31" rather than its negation so that NaN takes the else branch.
    if (std::fabs(y) < kTwoPow31) {
      // nearbyint rounds in the current mode, round-to-nearest-even by default, without
      // raising FE_INEXACT; the result is an exact integer in (-2^31, 2^31).
      q = static_cast<std::int32_t>(std::nearbyint(y));
      // Representable, but summing it over the job's workers could leave int32.
      if (q > max_magnitude || q < -max_magnitude) all_representable = false;
    } else {
      q = std::numeric_limits<std::int32_t>::min();
      all_representable = false;
    }
    proto::store_be_i32(out + 4 * i, q);
  }
  return all_representable;
}

void dequantize_scalar(const std::uint8_t* in, std::size_t n, float scale, float* out) {
  // One float division, shared by every path, so all of them multiply by the same inverse.
  const float inverse = 1.0f / scale;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(proto::load_be_i32(in + 4 * i)) * inverse;
  }
}

void bswap32_scalar(const void* in, std::size_t n, void* out) {
  const auto* src = static_cast<const std::uint8_t*>(in);
  auto* dst = static_cast<std::uint8_t*>(out);
  for (std::size_t i = 0; i < n; ++i) {
    // Moved as raw words, never as float values, so NaN payloads survive untouched.
    const std::uint32_t swapped = proto::load_be32(src + 4 * i);
    std::memcpy(dst + 4 * i, &swapped, sizeof swapped);
  }
}

}  // namespace atp::quant::detail
