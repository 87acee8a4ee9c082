#pragma once
// Lending the homes of absent jobs (DESIGN.md §7). Admission gives every job a home slice of
// the pool, the slice static partitioning would give it; while a job is not there (not yet
// arrived, or gone), its home is lent to a present job next to it, so a job alone runs on the
// whole pool and jobs that share run exactly on their own homes, as static slices do. A home
// is contiguous, so a lent slice joins the present home just below it (or, when no home below
// takes it, the one just above); a slice that overlaps any present job's own home is lent to
// nobody.
#include <cstdint>
#include <span>
#include <vector>

#include "control/slice_allocator.h"

namespace atp::control {

// Each job's home to plan on now: its own, grown over the absent homes next to it when
// present; its own, unchanged, when absent. A job grows only while its home holds fewer than
// `wants` (its window: more than it may have in flight is of no use to it, and every move
// changes where its seqs go), by whole slices. `homes`, `present` and `wants` are per job,
// same order.
std::vector<Slice> lend_idle_homes(std::span<const Slice> homes, const std::vector<bool>& present,
                                   std::span<const std::uint32_t> wants);

// The same for jobs admitted one at a time (the controller's), where what no job holds is no
// absent job's home: the pool's idle indexes, [0, pool) less every home, are cut into blocks
// at multiples of `block` (the share each job is given) and lent as absent homes are. Returns
// each job's home to plan on, in the order of `homes`.
std::vector<Slice> lend_idle_pool(std::span<const Slice> homes, std::uint32_t pool,
                                  std::uint32_t block, std::span<const std::uint32_t> wants);

}  // namespace atp::control
