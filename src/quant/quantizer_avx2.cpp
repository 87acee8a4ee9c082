// AVX2 kernels: 8 floats per vector, byte swap fused via vpshufb, scalar tail (quantize: a
// masked vector tail, so that it calls nothing; see there).
// Each function carries target("avx2") so the file builds without -mavx2; quantizer.cpp only
// calls these after checking the CPU. Quantize and dequantize do four vectors per loop step
// (two measured ~30% faster than one on cache-resident buffers, as loop overhead competes
// with the real work; four take 17 more instructions off a K = 64 fragment's pair).
#include <immintrin.h>

#include <cstdint>

#include "quant/avx2_lanes.h"
#include "quant/kernels.h"

namespace atp::quant::detail {
namespace {

// Quantizes 8 floats to 8 big-endian int32 and returns the (host order) integers.
//
// vcvtps2dq rounds half-to-even under the default MXCSR and returns INT32_MIN ("integer
// indefinite") for NaN and |y| >= 2^31, which is exactly the definition's output. In-range
// results never equal INT32_MIN (the float closest to -2^31 above it is -2^31 + 128), and
// y == -2^31 itself is non-representable by definition, so "some q == INT32_MIN" is precisely
// "some value not representable"; callers track the largest |q| (unsigned), which also checks
// the per-job magnitude bound.
ATP_AVX2 inline __m256i quantize8(const float* in, __m256 scale, __m256i control,
                                  std::uint8_t* out) {
  const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(in), scale));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_shuffle_epi8(q, control));
  return q;
}

// Lanes below `n` (0..8) set.
ATP_AVX2 inline __m256i first_lanes(std::size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// quantize8 on the lanes of `mask` only: the others are neither read nor written, and come
// back as 0 (which passes any magnitude check).
ATP_AVX2 inline __m256i quantize8_masked(const float* in, __m256i mask, __m256 scale,
                                         __m256i control, std::uint8_t* out) {
  const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_maskload_ps(in, mask), scale));
  _mm256_maskstore_epi32(reinterpret_cast<int*>(out), mask, _mm256_shuffle_epi8(q, control));
  return q;
}

ATP_AVX2 inline void dequantize8(const std::uint8_t* in, __m256 inverse, __m256i control,
                                 float* out) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  const __m256 q = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(raw, control));
  _mm256_storeu_ps(out, _mm256_mul_ps(q, inverse));
}

ATP_AVX2 inline void bswap8(const std::uint8_t* in, __m256i control, std::uint8_t* out) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_shuffle_epi8(raw, control));
}

}  // namespace

ATP_AVX2 bool quantize_avx2(const float* in, std::size_t n, float scale,
                           std::int32_t max_magnitude, std::uint8_t* out) {
  const __m256 scale_v = _mm256_set1_ps(scale);
  const __m256i control = bswap32_control();
  // Largest |q| seen, unsigned: |INT32_MIN| reads as 2^31, above any max_magnitude, so the
  // non-representable lanes fail the same single comparison at the end.
  __m256i largest = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i q0 = quantize8(in + i, scale_v, control, out + 4 * i);
    const __m256i q1 = quantize8(in + i + 8, scale_v, control, out + 4 * i + 32);
    const __m256i q2 = quantize8(in + i + 16, scale_v, control, out + 4 * i + 64);
    const __m256i q3 = quantize8(in + i + 24, scale_v, control, out + 4 * i + 96);
    largest = _mm256_max_epu32(
        largest, _mm256_max_epu32(_mm256_max_epu32(_mm256_abs_epi32(q0), _mm256_abs_epi32(q1)),
                                  _mm256_max_epu32(_mm256_abs_epi32(q2), _mm256_abs_epi32(q3))));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i q = quantize8(in + i, scale_v, control, out + 4 * i);
    largest = _mm256_max_epu32(largest, _mm256_abs_epi32(q));
  }
  // The last 1..7 values masked, not by quantize_scalar: a call here made the compiler save
  // registers and realign the stack on every call, tail or not (12 instructions of 100 for a
  // K = 64 fragment). The lanes compute exactly what the loop's do.
  if (i < n) {
    const __m256i q = quantize8_masked(in + i, first_lanes(n - i), scale_v, control, out + 4 * i);
    largest = _mm256_max_epu32(largest, _mm256_abs_epi32(q));
  }
  return all_within(largest, max_magnitude);
}

ATP_AVX2 void dequantize_avx2(const std::uint8_t* in, std::size_t n, float scale, float* out) {
  const __m256 inverse = _mm256_set1_ps(1.0f / scale);
  const __m256i control = bswap32_control();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    dequantize8(in + 4 * i, inverse, control, out + i);
    dequantize8(in + 4 * i + 32, inverse, control, out + i + 8);
    dequantize8(in + 4 * i + 64, inverse, control, out + i + 16);
    dequantize8(in + 4 * i + 96, inverse, control, out + i + 24);
  }
  for (; i + 8 <= n; i += 8) dequantize8(in + 4 * i, inverse, control, out + i);
  if (i < n) dequantize_scalar(in + 4 * i, n - i, scale, out + i);
}

ATP_AVX2 void bswap32_avx2(const void* in, std::size_t n, void* out) {
  const auto* src = static_cast<const std::uint8_t*>(in);
  auto* dst = static_cast<std::uint8_t*>(out);
  const __m256i control = bswap32_control();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    bswap8(src + 4 * i, control, dst + 4 * i);
    bswap8(src + 4 * i + 32, control, dst + 4 * i + 32);
  }
  if (i + 8 <= n) {
    bswap8(src + 4 * i, control, dst + 4 * i);
    i += 8;
  }
  bswap32_scalar(src + 4 * i, n - i, dst + 4 * i);
}

}  // namespace atp::quant::detail
