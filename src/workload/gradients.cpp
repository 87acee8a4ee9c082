#include "workload/gradients.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "proto/byte_order.h"
#include "quant/quantizer.h"
#include "workload/rng.h"

namespace atp::workload {
namespace {

// Value i is splitmix64 of key + i (a counter hashed per value: cheaper than a generator step,
// and as reproducible), its top 24 bits mapped to [-1, 1) exactly, times `magnitude`.
[[gnu::always_inline]] inline void fill_hashed_values(std::uint64_t key, float magnitude,
                                                      float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t x = key + i;
    const std::uint64_t bits = splitmix64(x);
    out[i] = (static_cast<float>(bits >> 40) * 0x1.0p-23f - 1.0f) * magnitude;
  }
}

// The same loop compiled for AVX-512, where eight values' 64-bit multiplies are one
// instruction each: it was 13 % of a contended, lossy simulation (perf, scenario seed 1051),
// every worker and the verifier filling every gradient. A target attribute and a run-time
// check, as the quantizer's kernels (an ifunc, target_clones, crashed ThreadSanitizer's
// binaries before its runtime was up). Every path computes the same IEEE values.
__attribute__((target("avx512f,avx512dq,avx512vl"))) void fill_hashed_avx512(
    std::uint64_t key, float magnitude, float* out, std::size_t n) {
  fill_hashed_values(key, magnitude, out, n);
}

void fill_hashed(std::uint64_t key, float magnitude, float* out, std::size_t n) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  if (avx512)
    fill_hashed_avx512(key, magnitude, out, n);
  else
    fill_hashed_values(key, magnitude, out, n);
}

}  // namespace

void GradientSource::fill(std::uint32_t job, std::uint32_t worker, std::uint32_t iteration,
                          std::uint32_t tensor, std::span<float> out) const {
  std::uint64_t key = seed;
  key = splitmix64(key) ^ job;
  key = splitmix64(key) ^ worker;
  key = splitmix64(key) ^ iteration;
  key = splitmix64(key) ^ tensor;
  fill_hashed(key, magnitude, out.data(), out.size());
  if (overflow_fraction <= 0 && nan_fraction <= 0) return;
  Rng rng(key);  // the faults, value by value in order, as they always were drawn
  for (float& value : out) {
    if (rng.chance(overflow_fraction)) value *= 1e12f;
    if (rng.chance(nan_fraction)) value = std::numeric_limits<float>::quiet_NaN();
  }
}

ExactSum::ExactSum(std::uint16_t values_per_packet, float scale, int workers)
    : k_(values_per_packet), scale_(scale), max_magnitude_(quant::sum_safe_magnitude(workers)),
      wire_(std::size_t{values_per_packet} * 4) {}

void ExactSum::reset(std::size_t size) {
  ints_.assign(size, 0);
  floats_.assign(size, 0.0);
  integer_fragment_.assign((size + k_ - 1) / k_, true);
}

void ExactSum::add(std::span<const float> in) {
  for (std::size_t first = 0, f = 0; first < in.size(); first += k_, ++f) {
    const std::size_t count = std::min<std::size_t>(k_, in.size() - first);
    for (std::size_t i = first; i < first + count; ++i) floats_[i] += in[i];
    if (!integer_fragment_[f]) continue;
    if (!quant::quantize_to_wire(in.data() + first, count, scale_, max_magnitude_, wire_.data())) {
      integer_fragment_[f] = false;
      continue;
    }
    for (std::size_t i = 0; i < count; ++i) ints_[first + i] += proto::load_be_i32(wire_.data() + 4 * i);
  }
}

void ExactSum::finish(std::span<float> out) {
  for (std::size_t first = 0, f = 0; first < out.size(); first += k_, ++f) {
    const std::size_t count = std::min<std::size_t>(k_, out.size() - first);
    if (!integer_fragment_[f]) {
      for (std::size_t i = first; i < first + count; ++i) out[i] = static_cast<float>(floats_[i]);
      continue;
    }
    for (std::size_t i = 0; i < count; ++i)
      proto::store_be_i32(wire_.data() + 4 * i, static_cast<std::int32_t>(ints_[first + i]));
    quant::dequantize_from_wire(wire_.data(), count, scale_, out.data() + first);
  }
}

}  // namespace atp::workload
