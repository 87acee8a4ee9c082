#pragma once
// A job's home slice of a switch's aggregator pool, as the worker and its PSs both read it.
// Admission gives each job the slice static partitioning would (ClusterConfig::home_slice);
// with several PS shards, shard k plans over the home indices congruent to k, so shards never
// hand out the same aggregator. Before the first plan arrives, seq t takes its shard's home in
// turn: the plan's own choice for a job that keeps to its home.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "proto/aggregator_index.h"

namespace atp::engines {

// A result plans the seq this many after it: two windows, so a worker that lost one result
// has a window's time to recover it before the seq it plans is due (at most the ring, whose
// seqs a worker tracks).
inline std::uint32_t plan_lag(std::uint32_t window, std::uint32_t ring) {
  return std::min(2 * window, ring);
}

struct HomeSlice {
  std::uint32_t first = 0;
  std::uint32_t count = 0;  // 0: none (the job's lanes start hashed)
  // The shards planning it apart: the job's PS shards when they borrow, else 1 (home turns
  // are the same whoever computes them). ClusterConfig::home_of decides, for workers and PSs.
  std::uint32_t shards = 1;

  // Home aggregators of shard `shard`: the indices of the slice congruent to it,
  // first + start_of(shard) + shards * i.
  std::uint32_t shard_size(std::uint32_t shard) const {
    const std::uint32_t start = start_of(shard);
    return start >= count ? 0 : (count - start + shards - 1) / shards;
  }
  std::uint32_t shard_member(std::uint32_t shard, std::uint32_t i) const {
    return first + start_of(shard) + shards * i;
  }
  // Where the shard's first home aggregator sits, from `first`.
  std::uint32_t start_of(std::uint32_t shard) const {
    return (shard + shards - first % shards) % shards;
  }

  // Where seq `seq` goes before any plan: its shard's home aggregators in turn, each reused
  // only after all the shard's others, so the cap (in the shard's fragments) is their number.
  std::optional<proto::LaneAssignment> initial(std::uint32_t seq, std::uint32_t window) const {
    // (window: the workers' window, bounding the cap)
    if (shards == 0 || window % shards != 0) return std::nullopt;  // the PSs plan nothing
    const std::uint32_t shard = seq % shards;
    const std::uint32_t size = shard_size(shard);
    if (size == 0) return std::nullopt;
    return proto::LaneAssignment{shard_member(shard, (seq / shards) % size),
                                 std::min(window / shards, size)};
  }
};

}  // namespace atp::engines
