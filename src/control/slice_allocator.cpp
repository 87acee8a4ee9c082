#include "control/slice_allocator.h"

#include <stdexcept>

namespace atp::control {

void SliceAllocator::reserve(std::uint32_t job, Slice slice) {
  if (slice.count == 0) return;
  if (std::uint64_t{slice.first} + slice.count > pool_)
    throw std::invalid_argument("job " + std::to_string(job) + ": slice beyond the pool");
  release(job);
  for (const auto& [first, holder] : by_first_) {
    const Slice held = by_job_.at(holder);
    if (slice.first < held.first + held.count && held.first < slice.first + slice.count)
      throw std::invalid_argument("job " + std::to_string(job) + ": slice overlaps job " +
                                  std::to_string(holder) + "'s");
  }
  by_first_[slice.first] = job;
  by_job_[job] = slice;
}

std::optional<Slice> SliceAllocator::allocate(std::uint32_t job, std::uint32_t count) {
  const std::optional<Slice> old = slice_of(job);
  release(job);
  if (count == 0) return Slice{};
  std::uint32_t gap_start = 0;  // first-fit over the gaps between held slices, in order
  for (const auto& [first, holder] : by_first_) {
    if (first - gap_start >= count) break;
    gap_start = first + by_job_.at(holder).count;
  }
  if (std::uint64_t{gap_start} + count > pool_) {
    if (old) reserve(job, *old);  // refused: the job keeps what it held
    return std::nullopt;
  }
  reserve(job, {gap_start, count});
  return by_job_.at(job);
}

void SliceAllocator::release(std::uint32_t job) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return;
  by_first_.erase(it->second.first);
  by_job_.erase(it);
}

std::optional<Slice> SliceAllocator::slice_of(std::uint32_t job) const {
  auto it = by_job_.find(job);
  return it == by_job_.end() ? std::nullopt : std::optional<Slice>(it->second);
}

std::uint32_t SliceAllocator::free_aggregators() const {
  std::uint32_t held = 0;
  for (const auto& [job, slice] : by_job_) held += slice.count;
  return pool_ - held;
}

std::uint32_t SliceAllocator::largest_free_run() const {
  std::uint32_t best = 0, gap_start = 0;
  for (const auto& [first, holder] : by_first_) {
    best = std::max(best, first - gap_start);
    gap_start = first + by_job_.at(holder).count;
  }
  return std::max(best, pool_ - gap_start);
}

void place_static_slice(SliceAllocator& slices, engines::Policy policy, engines::SwitchJob& job,
                        const std::string& switch_name) {
  if (policy != engines::Policy::static_partition || job.static_count == 0) return;
  const auto slice = slices.allocate(job.job, job.static_count);
  if (!slice)
    throw std::invalid_argument(
        "switch '" + switch_name + "': no free run of " + std::to_string(job.static_count) +
        " aggregators for job " + std::to_string(job.job) + "'s static slice (" +
        std::to_string(slices.free_aggregators()) + " free, largest run " +
        std::to_string(slices.largest_free_run()) + "); remove a job first");
  job.static_first = slice->first;
}

void reserve_file_slice(SliceAllocator& slices, engines::Policy policy, const engines::SwitchJob& job) {
  if (policy == engines::Policy::static_partition && job.static_count > 0)
    slices.reserve(job.job, {job.static_first, job.static_count});
}

}  // namespace atp::control
