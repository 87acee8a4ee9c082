#include "sim/gradients.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "proto/byte_order.h"
#include "quant/quantizer.h"
#include "sim/rng.h"

namespace atp::sim {

void GradientSource::fill(std::uint32_t job, std::uint32_t worker, std::uint32_t iteration,
                          std::uint32_t tensor, std::span<float> out) const {
  std::uint64_t key = seed;
  key = splitmix64(key) ^ job;
  key = splitmix64(key) ^ worker;
  key = splitmix64(key) ^ iteration;
  key = splitmix64(key) ^ tensor;
  Rng rng(key);
  for (float& v : out) {
    v = static_cast<float>((rng.uniform() * 2 - 1) * magnitude);
    if (overflow_fraction > 0 && rng.chance(overflow_fraction)) v *= 1e12f;
    if (nan_fraction > 0 && rng.chance(nan_fraction)) v = std::numeric_limits<float>::quiet_NaN();
  }
}

void exact_allreduce(std::span<const std::vector<float>> inputs, std::uint16_t k, float scale,
                     std::span<float> out) {
  const std::size_t n = out.size();
  const int workers = static_cast<int>(inputs.size());
  const std::int32_t limit = quant::sum_safe_magnitude(workers);
  std::vector<std::uint8_t> wire(std::size_t{k} * 4);
  std::vector<std::int64_t> sum(k);
  for (std::size_t first = 0; first < n; first += k) {
    const std::size_t count = std::min<std::size_t>(k, n - first);
    bool integers = true;
    std::fill(sum.begin(), sum.end(), 0);
    for (const auto& in : inputs) {
      if (!quant::quantize_to_wire(in.data() + first, count, scale, limit, wire.data())) {
        integers = false;
        break;
      }
      for (std::size_t i = 0; i < count; ++i) sum[i] += proto::load_be_i32(wire.data() + 4 * i);
    }
    if (integers) {
      for (std::size_t i = 0; i < count; ++i)
        proto::store_be_i32(wire.data() + 4 * i, static_cast<std::int32_t>(sum[i]));
      quant::dequantize_from_wire(wire.data(), count, scale, out.data() + first);
      continue;
    }
    for (std::size_t i = 0; i < count; ++i) {
      double acc = 0;
      for (const auto& in : inputs) acc += in[first + i];
      out[first + i] = static_cast<float>(acc);
    }
  }
}

}  // namespace atp::sim
