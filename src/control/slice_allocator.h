#pragma once
// What admission hands out of a switch's pool under the static policy: contiguous slices.
// The cluster file's derivation cuts the pool into equal slices for the jobs it names; at run
// time a job admitted later must get aggregators nobody holds, or be refused, never a slice
// that overlaps a running job's (which re-deriving from an edited file would give).
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "engines/switch/switch_tables.h"

namespace atp::control {

struct Slice {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  bool operator==(const Slice&) const = default;
};

class SliceAllocator {
 public:
  explicit SliceAllocator(std::uint32_t pool) : pool_(pool) {}

  // Records the slice `job` holds (from the file's derivation); throws std::invalid_argument
  // if it overlaps another job's or leaves the pool.
  void reserve(std::uint32_t job, Slice slice);
  // The lowest free run of `count` aggregators for `job` (its own old slice counts as free),
  // or nullopt if there is none; then the job keeps the slice it held.
  std::optional<Slice> allocate(std::uint32_t job, std::uint32_t count);
  void release(std::uint32_t job);

  std::optional<Slice> slice_of(std::uint32_t job) const;
  std::uint32_t free_aggregators() const;
  std::uint32_t largest_free_run() const;

 private:
  std::uint32_t pool_;
  std::map<std::uint32_t, std::uint32_t> by_first_;  // first -> job
  std::map<std::uint32_t, Slice> by_job_;
};

// Admitting `job` at run time under `policy` on switch `switch_name`: a static job gets a free run
// of its static_count from `slices` (job.static_first is set to it); throws
// std::invalid_argument saying what is free when there is no such run. Any other job is left
// as it is.
void place_static_slice(SliceAllocator& slices, engines::Policy policy, engines::SwitchJob& job,
                        const std::string& switch_name);
// A job a cluster file names, as the file cut the pool: only a static job holds a slice (an
// ATP job's file slice means nothing to the switch, and once showed as its static_slice).
void reserve_file_slice(SliceAllocator& slices, engines::Policy policy, const engines::SwitchJob& job);

}  // namespace atp::control
