// AVX-512 kernels: 16 floats per step, byte swap fused via vpshufb (needs BW), tails done with
// masked loads and stores instead of a scalar loop. Each function carries
// target("avx512f,avx512bw") so the file builds without -mavx512*; quantizer.cpp only calls
// these after checking the CPU.
//
// GCC 12's _mm512_undefined_* helpers trip -W(maybe-)uninitialized when inlined into
// target-attributed functions (GCC bug 105593, fixed in later releases); the warning is spurious.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "quant/kernels.h"

#define ATP_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace atp::quant::detail {
namespace {

// vpshufb control reversing the 4 bytes of every 32-bit lane.
ATP_AVX512 inline __m512i bswap32_control() {
  const __m128i lane = _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  return _mm512_broadcast_i32x4(lane);
}

// Mask selecting the first `count` (< 16) lanes.
inline __mmask16 first_lanes(std::size_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}

}  // namespace

ATP_AVX512 bool quantize_avx512(const float* in, std::size_t n, float scale,
                               std::int32_t max_magnitude, std::uint8_t* out) {
  const __m512 scale_v = _mm512_set1_ps(scale);
  const __m512i control = bswap32_control();
  // See quantize_avx2: vcvtps2dq yields INT32_MIN exactly for the non-representable inputs,
  // whose |q| reads as 2^31 unsigned, so |q| above max_magnitude (unsigned) is the whole test.
  // Lanes over the limit are OR-ed into a mask: no reduction across lanes at the end.
  const __m512i limit = _mm512_set1_epi32(max_magnitude);
  __mmask16 over = 0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(in + i), scale_v));
    over |= _mm512_cmpgt_epu32_mask(_mm512_abs_epi32(q), limit);
    _mm512_storeu_si512(out + 4 * i, _mm512_shuffle_epi8(q, control));
  }
  if (i < n) {
    // Masked-off lanes are neither read (no fault past the end) nor written nor counted.
    const __mmask16 lanes = first_lanes(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, in + i);
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, scale_v));
    over |= _mm512_mask_cmpgt_epu32_mask(lanes, _mm512_abs_epi32(q), limit);
    _mm512_mask_storeu_epi32(out + 4 * i, lanes, _mm512_shuffle_epi8(q, control));
  }
  return over == 0;
}

ATP_AVX512 void dequantize_avx512(const std::uint8_t* in, std::size_t n, float scale, float* out) {
  const __m512 inverse = _mm512_set1_ps(1.0f / scale);
  const __m512i control = bswap32_control();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = _mm512_shuffle_epi8(_mm512_loadu_si512(in + 4 * i), control);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(q), inverse));
  }
  if (i < n) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512i q = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi32(lanes, in + 4 * i), control);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_mul_ps(_mm512_cvtepi32_ps(q), inverse));
  }
}

ATP_AVX512 void bswap32_avx512(const void* in, std::size_t n, void* out) {
  const auto* src = static_cast<const std::uint8_t*>(in);
  auto* dst = static_cast<std::uint8_t*>(out);
  const __m512i control = bswap32_control();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_si512(dst + 4 * i, _mm512_shuffle_epi8(_mm512_loadu_si512(src + 4 * i), control));
  }
  if (i < n) {
    const __mmask16 lanes = first_lanes(n - i);
    const __m512i raw = _mm512_maskz_loadu_epi32(lanes, src + 4 * i);
    _mm512_mask_storeu_epi32(dst + 4 * i, lanes, _mm512_shuffle_epi8(raw, control));
  }
}

}  // namespace atp::quant::detail
