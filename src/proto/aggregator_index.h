#pragma once
// Which aggregator a fragment uses. A job's first window of seqs uses CRC32 over (job, slot),
// each as 4 big-endian bytes, slot = seq mod window: a 32-bit value each switch takes modulo
// its own pool size. After that, every result names the aggregator its slot's next seq uses
// and the in-flight cap it leaves under (the PS's plan, engines/ps/aggregator_planner.h),
// packed into the header's `remap_index`.
#include <cstdint>

namespace atp::proto {

std::uint32_t aggregator_hash(std::uint32_t job, std::uint32_t slot);

// remap_index = cap << 20 | aggregator: planned pools hold at most 2^20 aggregators, and a
// cap of 0 means none (the worker's own window), as does any cap past 4095.
inline constexpr std::uint32_t kMaxPlannedPool = 1u << 20;
inline constexpr std::uint32_t kMaxEncodedCap = (1u << 12) - 1;

struct LaneAssignment {
  std::uint32_t aggregator = 0;
  std::uint32_t in_flight_cap = 0;  // 0: no cap
};

inline std::uint32_t encode_lane_assignment(LaneAssignment a) {
  const std::uint32_t cap = a.in_flight_cap > kMaxEncodedCap ? 0 : a.in_flight_cap;
  return cap << 20 | (a.aggregator & (kMaxPlannedPool - 1));
}

inline LaneAssignment decode_lane_assignment(std::uint32_t remap_index) {
  return {remap_index & (kMaxPlannedPool - 1), remap_index >> 20};
}

}  // namespace atp::proto
