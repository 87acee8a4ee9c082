#pragma once
// The switch's aggregator pool, laid out as a P4 program holds it: one register array per field,
// all indexed by aggregator. Fixed size, allocated once; nothing grows per packet.
#include <cstdint>
#include <vector>

namespace atp::engines {

struct AggregatorOwner {
  std::uint32_t job = 0;
  std::uint32_t tensor = 0;
  std::uint32_t seq = 0;
  bool operator==(const AggregatorOwner&) const = default;
};

// Per-aggregator metadata (one register each on hardware).
struct AggregatorState {
  bool valid = false;     // owned by `owner`
  bool complete = false;  // count reached the fan-in; the sum went upward
  bool ecn = false;       // sticky: some contribution saw congestion
  bool wrapped = false;   // sticky: an int32 addition overflowed
  AggregatorOwner owner;
  std::uint32_t bitmap = 0;  // contributors at this level
  std::uint8_t count = 0;
  std::uint16_t value_count = 0;
};

class AggregatorPool {
 public:
  AggregatorPool(std::uint32_t size, std::uint16_t values_per_aggregator)
      : state_(size), values_(std::size_t{size} * values_per_aggregator),
        width_(values_per_aggregator) {}

  std::uint32_t size() const { return static_cast<std::uint32_t>(state_.size()); }
  std::uint16_t width() const { return width_; }
  AggregatorState& state(std::uint32_t i) { return state_[i]; }
  const AggregatorState& state(std::uint32_t i) const { return state_[i]; }
  std::int32_t* values(std::uint32_t i) { return values_.data() + std::size_t{i} * width_; }

  void free(std::uint32_t i) { state_[i] = AggregatorState{}; }

  std::uint32_t in_use() const {
    std::uint32_t n = 0;
    for (const auto& s : state_) n += s.valid ? 1 : 0;
    return n;
  }

 private:
  std::vector<AggregatorState> state_;
  std::vector<std::int32_t> values_;
  std::uint16_t width_;
};

}  // namespace atp::engines
