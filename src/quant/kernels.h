#pragma once
// Internal: the per-ISA kernels behind quantizer.h. quantizer.cpp picks one at run time.
//
// The AVX kernels live in their own translation units and carry per-function target attributes,
// so the library builds without -mavx* flags and only calls them after checking the CPU.
// Every kernel accepts unaligned pointers and any n (tails included).
#include <cstddef>
#include <cstdint>

namespace atp::quant::detail {

// 2^31 as a float: the smallest magnitude that is not representable after scaling.
inline constexpr float kTwoPow31 = 2147483648.0f;

bool quantize_scalar(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                     std::uint8_t* out);
void dequantize_scalar(const std::uint8_t* in, std::size_t n, float scale, float* out);
// Reverses the bytes of each of n 32-bit words (host float <-> big-endian wire, both ways).
void bswap32_scalar(const void* in, std::size_t n, void* out);

bool quantize_avx2(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                   std::uint8_t* out);
void dequantize_avx2(const std::uint8_t* in, std::size_t n, float scale, float* out);
void bswap32_avx2(const void* in, std::size_t n, void* out);

bool quantize_avx512(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                     std::uint8_t* out);
void dequantize_avx512(const std::uint8_t* in, std::size_t n, float scale, float* out);
void bswap32_avx512(const void* in, std::size_t n, void* out);

// Half-precision kernels (quantizer_half.cpp, quantizer_half_avx2.cpp): `brain` picks bfloat16
// over IEEE float16. The AVX2 ones need F16C too.
bool quantize_half_scalar(bool brain, const std::uint16_t* in, std::size_t n, float scale,
                          std::int32_t max_magnitude, std::uint8_t* out);
void dequantize_half_scalar(bool brain, const std::uint8_t* in, std::size_t n, float scale,
                            std::uint16_t* out);
bool quantize_half_avx2(bool brain, const std::uint16_t* in, std::size_t n, float scale,
                        std::int32_t max_magnitude, std::uint8_t* out);
void dequantize_half_avx2(bool brain, const std::uint8_t* in, std::size_t n, float scale,
                          std::uint16_t* out);

// Exact widening and round-to-nearest-even narrowing of one value.
float widen_half(bool brain, std::uint16_t bits);
std::uint16_t narrow_to_half(bool brain, float value);

}  // namespace atp::quant::detail
