#pragma once
// Internal: AVX2 pieces the float32 and the half-precision kernels share. Each carries
// target("avx2"), so it inlines into either file's functions (the half-precision ones add
// F16C), and nothing here runs before the caller has checked the CPU.
#include <immintrin.h>

#include <cstdint>

#define ATP_AVX2 __attribute__((target("avx2")))

namespace atp::quant::detail {

// vpshufb control reversing the 4 bytes of every 32-bit lane (shuffles stay within 128-bit lanes,
// which is all a 32-bit swap needs).
ATP_AVX2 inline __m256i bswap32_control() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

// True if every lane of `largest`, the largest |q| seen read unsigned, is at most
// `max_magnitude`: |INT32_MIN| reads as 2^31, above any bound, so the non-representable lanes
// fail the same single comparison.
ATP_AVX2 inline bool all_within(__m256i largest, std::int32_t max_magnitude) {
  const __m256i limit = _mm256_set1_epi32(max_magnitude);
  const __m256i within = _mm256_cmpeq_epi32(_mm256_max_epu32(largest, limit), limit);
  return _mm256_movemask_epi8(within) == -1;
}

}  // namespace atp::quant::detail
