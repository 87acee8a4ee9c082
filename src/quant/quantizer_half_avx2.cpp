// AVX2 + F16C kernels for half-precision tensors: 8 values per vector, widened in registers
// (vcvtph2ps for float16, a 16-bit shift for bfloat16), then the float32 kernels' quantize and
// byte swap; results narrowed back with vcvtps2ph or a nearest-even add and shift. Tails go
// through an 8-value buffer, so every lane computes what the loop's lanes do.
#include <immintrin.h>

#include <cstring>

#include "quant/avx2_lanes.h"
#include "quant/kernels.h"

#define ATP_HALF_AVX2 __attribute__((target("avx2,f16c")))

namespace atp::quant::detail {
namespace {

template <bool brain>
ATP_HALF_AVX2 inline __m256 widen8(const std::uint16_t* in) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  if constexpr (brain) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  else return _mm256_cvtph_ps(raw);
}

template <bool brain>
ATP_HALF_AVX2 inline __m128i narrow8(__m256 v) {
  if constexpr (!brain) return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i words = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
  // Pack the eight 32-bit words (each below 2^16) to 16 bits; packus works per 128-bit lane,
  // so the two lanes' halves are gathered into the low 128 bits afterwards.
  const __m256i packed = _mm256_packus_epi32(words, words);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0b1000));
}

// Quantizes 8 values; returns |q| (unsigned reading: INT32_MIN, not representable, is 2^31).
template <bool brain>
ATP_HALF_AVX2 inline __m256i quantize8(const std::uint16_t* in, __m256 scale,
                                       __m256i control, std::uint8_t* out) {
  const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(widen8<brain>(in), scale));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_shuffle_epi8(q, control));
  return _mm256_abs_epi32(q);
}

template <bool brain>
ATP_HALF_AVX2 inline void dequantize8(const std::uint8_t* in, __m256 inverse,
                                      __m256i control, std::uint16_t* out) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_shuffle_epi8(raw, control)), inverse);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), narrow8<brain>(v));
}

template <bool brain>
ATP_HALF_AVX2 bool quantize_halves(const std::uint16_t* in, std::size_t n, float scale,
                                   std::int32_t max_magnitude, std::uint8_t* out) {
  const __m256 scale_v = _mm256_set1_ps(scale);
  const __m256i control = bswap32_control();
  __m256i largest = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = quantize8<brain>(in + i, scale_v, control, out + 4 * i);
    const __m256i b = quantize8<brain>(in + i + 8, scale_v, control, out + 4 * i + 32);
    largest = _mm256_max_epu32(largest, _mm256_max_epu32(a, b));
  }
  for (; i + 8 <= n; i += 8)
    largest = _mm256_max_epu32(largest, quantize8<brain>(in + i, scale_v, control, out + 4 * i));
  if (i < n) {  // zero-padded: the padding quantizes to 0, which passes any bound
    std::uint16_t tail_in[8] = {};
    std::uint8_t tail_out[32];
    std::memcpy(tail_in, in + i, 2 * (n - i));
    largest = _mm256_max_epu32(largest, quantize8<brain>(tail_in, scale_v, control, tail_out));
    std::memcpy(out + 4 * i, tail_out, 4 * (n - i));
  }
  return all_within(largest, max_magnitude);
}

template <bool brain>
ATP_HALF_AVX2 void dequantize_halves(const std::uint8_t* in, std::size_t n, float scale,
                                     std::uint16_t* out) {
  const __m256 inverse = _mm256_set1_ps(1.0f / scale);
  const __m256i control = bswap32_control();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    dequantize8<brain>(in + 4 * i, inverse, control, out + i);
    dequantize8<brain>(in + 4 * i + 32, inverse, control, out + i + 8);
  }
  for (; i + 8 <= n; i += 8) dequantize8<brain>(in + 4 * i, inverse, control, out + i);
  if (i < n) {
    std::uint8_t tail_in[32] = {};
    std::uint16_t tail_out[8];
    std::memcpy(tail_in, in + 4 * i, 4 * (n - i));
    dequantize8<brain>(tail_in, inverse, control, tail_out);
    std::memcpy(out + i, tail_out, 2 * (n - i));
  }
}

}  // namespace

ATP_HALF_AVX2 bool quantize_half_avx2(bool brain, const std::uint16_t* in, std::size_t n, float scale,
                        std::int32_t max_magnitude, std::uint8_t* out) {
  return brain ? quantize_halves<true>(in, n, scale, max_magnitude, out)
               : quantize_halves<false>(in, n, scale, max_magnitude, out);
}

ATP_HALF_AVX2 void dequantize_half_avx2(bool brain, const std::uint8_t* in, std::size_t n, float scale,
                          std::uint16_t* out) {
  if (brain)
    dequantize_halves<true>(in, n, scale, out);
  else
    dequantize_halves<false>(in, n, scale, out);
}

}  // namespace atp::quant::detail
