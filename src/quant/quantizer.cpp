// Public entry points: run-time ISA dispatch plus the scale and overflow helpers.
#include "quant/quantizer.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>

#include "quant/kernels.h"

namespace atp::quant {
namespace {

struct CpuFeatures {
  bool avx2 = false;
  bool avx512 = false;  // F for the arithmetic and masks, BW for the 512-bit byte shuffle.
};

CpuFeatures detect_features() {
  // libgcc's checks also confirm the OS saves the YMM/ZMM state (XGETBV), not just CPUID bits.
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures cached = detect_features();  // Thread-safe, checked once.
  return cached;
}

// An ISA the CPU cannot run falls back to the best one it can; since best_isa() is then
// narrower than the request, the fallback never executes an unsupported instruction.
Isa runnable(Isa isa) { return supported(isa) ? isa : best_isa(); }

}  // namespace

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

Isa best_isa() {
  static const Isa best = features().avx512 ? Isa::avx512
                          : features().avx2 ? Isa::avx2
                                            : Isa::scalar;
  return best;
}

bool supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return features().avx2;
    case Isa::avx512: return features().avx512;
  }
  return false;
}

namespace {

// One ISA's kernels, resolved once: a fragment-sized call must not pay for feature checks.
struct Kernels {
  bool (*quantize)(const float*, std::size_t, float, std::int32_t, std::uint8_t*);
  void (*dequantize)(const std::uint8_t*, std::size_t, float, float*);
  void (*bswap32)(const void*, std::size_t, void*);
};

constexpr Kernels kScalar{detail::quantize_scalar, detail::dequantize_scalar,
                          detail::bswap32_scalar};
constexpr Kernels kAvx2{detail::quantize_avx2, detail::dequantize_avx2, detail::bswap32_avx2};
constexpr Kernels kAvx512{detail::quantize_avx512, detail::dequantize_avx512,
                          detail::bswap32_avx512};

const Kernels& kernels(Isa isa) {
  switch (runnable(isa)) {
    case Isa::avx512: return kAvx512;
    case Isa::avx2: return kAvx2;
    case Isa::scalar: break;
  }
  return kScalar;
}

// The best kernels, once known. An atomic pointer rather than a function-local static: the
// static's guard kept its slow path (and six register saves) in every fragment-sized call;
// a relaxed load is a plain one, and resolving twice in a race gives the same table.
std::atomic<const Kernels*> resolved_best{nullptr};

[[gnu::cold, gnu::noinline]] const Kernels& resolve_best_kernels() {
  const Kernels& best = kernels(best_isa());
  resolved_best.store(&best, std::memory_order_relaxed);
  return best;
}

const Kernels& best_kernels() {
  const Kernels* best = resolved_best.load(std::memory_order_relaxed);
  return best ? *best : resolve_best_kernels();
}

}  // namespace

bool quantize_to_wire(Isa isa, const float* in, std::size_t n, float scale,
                      std::int32_t max_magnitude, std::uint8_t* out) {
  return kernels(isa).quantize(in, n, scale, max_magnitude, out);
}

bool quantize_to_wire(Isa isa, const float* in, std::size_t n, float scale, std::uint8_t* out) {
  return quantize_to_wire(isa, in, n, scale, kAnyMagnitude, out);
}

bool quantize_to_wire(const float* in, std::size_t n, float scale, std::int32_t max_magnitude,
                      std::uint8_t* out) {
  return best_kernels().quantize(in, n, scale, max_magnitude, out);
}

void dequantize_from_wire(Isa isa, const std::uint8_t* in, std::size_t n, float scale, float* out) {
  kernels(isa).dequantize(in, n, scale, out);
}

bool quantize_to_wire(const float* in, std::size_t n, float scale, std::uint8_t* out) {
  return best_kernels().quantize(in, n, scale, kAnyMagnitude, out);
}

void dequantize_from_wire(const std::uint8_t* in, std::size_t n, float scale, float* out) {
  best_kernels().dequantize(in, n, scale, out);
}

void swap_words(const void* in, std::size_t n, void* out) { best_kernels().bswap32(in, n, out); }

// Host float <-> big-endian float is the same 32-bit byte reversal in both directions.
void floats_to_wire(const float* in, std::size_t n, std::uint8_t* out) { swap_words(in, n, out); }

void floats_from_wire(const std::uint8_t* in, std::size_t n, float* out) {
  swap_words(in, n, out);
}

std::int32_t sum_safe_magnitude(int workers) {
  return std::numeric_limits<std::int32_t>::max() / std::max(workers, 1);
}

bool sum_may_overflow(std::int64_t max_abs, int workers) {
  if (workers < 1) return false;  // Nothing is summed.
  // Treat max_abs as a magnitude; unsigned negation also covers INT64_MIN.
  const auto magnitude = max_abs < 0 ? 0 - static_cast<std::uint64_t>(max_abs)
                                     : static_cast<std::uint64_t>(max_abs);
  // magnitude * workers > INT32_MAX  <=>  magnitude > floor(INT32_MAX / workers) for integers;
  // dividing instead of multiplying cannot overflow whatever max_abs is.
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()) /
                     static_cast<std::uint64_t>(workers);
  return magnitude > limit;
}

float choose_scale(float max_abs_value, int workers) {
  // Exponent range keeping both the scale and its inverse normal, finite floats.
  constexpr int kMinExponent = -126;
  constexpr int kMaxExponent = 126;
  constexpr double kTwoPow31 = 2147483648.0;

  const float m = std::fabs(max_abs_value);
  // Zero: any scale works, 1 is the neutral choice. Inf/NaN: no scale can help; such fragments
  // are flagged by quantize_to_wire and travel as float32, so 1 is as good as any.
  if (m == 0.0f || !std::isfinite(m)) return 1.0f;
  const int w = std::max(workers, 1);

  // Exact integer arithmetic: m = mantissa * 2^(e - 24) with a 24-bit integer mantissa, so
  // m * w = product * 2^(e - 24) with product < 2^55. With product in [2^(b-1), 2^b):
  //   m * w * 2^k < 2^31  <=>  product < 2^(55 - e - k)  <=>  b <= 55 - e - k.
  int e = 0;
  const float fraction = std::frexp(m, &e);  // m = fraction * 2^e, fraction in [0.5, 1).
  const auto mantissa = static_cast<std::uint64_t>(std::ldexp(fraction, 24));
  const auto product = mantissa * static_cast<std::uint64_t>(w);
  const int bits = static_cast<int>(std::bit_width(product));
  int k = std::clamp(55 - e - bits, kMinExponent, kMaxExponent);

  // m * 2^k * w < 2^31 does not quite bound the int32 sum: rounding may carry m * 2^k up to
  // the next integer (e.g. 256 workers, m * 2^k = 2^23 - 0.5 rounds to 2^23, sum 2^31).
  // Halve once more in that case, so the quantized maxima provably sum without overflow.
  double y = std::ldexp(static_cast<double>(m), k);  // Exact: what the quantizer computes.
  while (k > kMinExponent && y < kTwoPow31 &&
         sum_may_overflow(static_cast<std::int64_t>(std::nearbyint(y)), w)) {
    --k;
    y /= 2;
  }
  // At kMinExponent the bound may still fail for enormous m * w; quantize_to_wire then
  // reports the values as non-representable and the fragment goes as float32.
  return std::ldexp(1.0f, k);
}

}  // namespace atp::quant
