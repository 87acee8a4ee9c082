#pragma once
// Synthetic gradients that any node can regenerate from (seed, job, worker, iteration,
// tensor), and the exact result an allreduce of them must produce.
#include <cstdint>
#include <span>
#include <vector>

namespace atp::workload {

struct GradientSource {
  std::uint64_t seed = 1;
  float magnitude = 1.0f;           // values are uniform in [-magnitude, magnitude)
  double overflow_fraction = 0;     // share of values blown up past what int32 can carry
  double nan_fraction = 0;          // share of values that are NaN

  void fill(std::uint32_t job, std::uint32_t worker, std::uint32_t iteration,
            std::uint32_t tensor, std::span<float> out) const;
};

// The result ATP must return, built one worker at a time (in rack-major worker order, the
// order the PS sums floats in): per fragment of K values, the dequantized int32 sum if every
// worker's values quantize within sum_safe_magnitude(workers), else the float sum in that order.
class ExactSum {
 public:
  ExactSum(std::uint16_t values_per_packet, float scale, int workers);

  void reset(std::size_t size);
  void add(std::span<const float> worker_values);
  void finish(std::span<float> out);

 private:
  std::uint16_t k_;
  float scale_;
  std::int32_t max_magnitude_;
  std::vector<std::int64_t> ints_;
  std::vector<double> floats_;
  std::vector<bool> integer_fragment_;
  std::vector<std::uint8_t> wire_;
};

}  // namespace atp::workload
