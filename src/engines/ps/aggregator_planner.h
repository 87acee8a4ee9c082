#pragma once
// Where a job's next fragments aggregate, decided by its PS (DESIGN.md §7).
//
// Hashing every job's lanes over one pool collides even when the pool could hold every job,
// and in a short pool a third of the fragments collide, each costing the PS link one packet
// per worker. Instead, admission gives each job a home slice of the pool (the slice static
// partitioning would give it), and the PS that answers seq s names, in that result, the
// aggregator seq s + lag will use and how many of its shard's fragments may be in flight when
// it leaves (proto::encode_lane_assignment; lag = plan_lag(), two windows). Every worker of
// the job takes the same result, so they agree.
//
// The plan keeps these rules:
//   - A job never collides with itself: seq t's aggregator differs from that of every seq of
//     its shard within the in-flight cap of it.
//   - Home turns: without borrowing, seq t takes its home's turn, which any worker can compute
//     for a plan it lost. With every job busy, each keeps to its home: static's packing,
//     without static's power-of-two window.
//   - With borrowing (opt-in), home first: a borrowed aggregator is used only when every home
//     one is taken by a nearby seq.
//   - Borrow what others leave idle, and give it back: the borrowing budget grows by one per
//     round of results and halves when a borrowed aggregator turns out busy; its owner's slice
//     is then left alone for a while, twice as long each time it is found busy again.
// Borrowing with several PS shards, each plans its own seqs over its own share of the pool
// (indices congruent to its shard), so shards never hand out the same aggregator.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engines/common.h"
#include "engines/home_slice.h"
#include "proto/aggregator_index.h"

namespace atp::engines {

struct PlannerSetup {
  std::uint32_t pool = 0;        // aggregators per switch
  std::uint32_t home_first = 0;  // the job's home slice [first, first + count)
  std::uint32_t home_count = 0;
  std::uint32_t window = 64;     // the workers' window: what the caps may reach
  std::uint32_t lag = 128;       // plan_lag(): the lanes, and how far ahead a result plans
  // The shards planning apart (dividing the window), and this one's index: the job's PSs when
  // borrowing, else 1 (home turns are the same whoever computes them).
  std::uint32_t shards = 1;
  std::uint32_t shard = 0;
  bool borrow = false;  // plan on other jobs' idle home aggregators too
};

// What a result tells the workers about its lane's next seq.
using LanePlan = proto::LaneAssignment;

// How long a neighbour's slice found busy is first left to its owner.
inline constexpr Duration kBorrowBackoff = 2 * kMillisecond;

struct PlannedResult {
  LanePlan next;              // for the seq `lag` later
  bool was_borrowed = false;  // the result's own seq had aggregated (or tried) on a borrowed one
};

class AggregatorPlanner {
 public:
  // Plans nothing (enabled() false) for an empty pool, one beyond proto::kMaxPlannedPool, or
  // shards that do not divide the window.
  explicit AggregatorPlanner(const PlannerSetup& setup);

  bool enabled() const { return enabled_; }
  // Seq `seq`'s result is leaving; it had aggregated at `aggregator` (as the fragments named
  // it) and `collided` says whether any part of it met a busy one. Returns the plan for
  // seq + lag.
  PlannedResult on_result(Time now, std::uint32_t seq, std::uint32_t aggregator, bool collided);

  // The control plane lent the job more of the pool, or took it back (control/home_lending.h):
  // plans from now on keep to `home` (same shards). Before the first result, the first plans
  // (which workers compute alone) follow it too. Plans already sent stand, and seqs near them
  // keep their turns or have their caps cut (home_turn()), so the job does not meet its own
  // seqs across the change; for a window or two it may still meet what it gave back: a price,
  // never a wrong sum.
  void set_home(const HomeSlice& home);

  std::uint32_t home_size() const { return static_cast<std::uint32_t>(home_.size()); }
  double borrowing() const { return borrow_; }

 private:
  struct Borrowable {
    std::uint32_t index = 0;
    std::uint32_t block = 0;  // the neighbour whose slice holds it
  };
  struct Neighbour {
    Time busy_until = 0;  // found busy: left to its owner until then
    Duration backoff = 0;  // how long it was last left alone
    Time last_collided = 0;
  };
  struct Lane {
    bool planned = false;
    std::uint32_t seq = 0, aggregator = 0, cap = 0;
  };

  void place_home();  // home_, borrowable_ and, before any result, the first plans
  void find_borrowable(const HomeSlice& home);
  bool learn(Time now, std::uint32_t aggregator, bool collided);  // returns: it was borrowed
  std::uint32_t cap_now() const;
  LanePlan choose(Time now, std::uint32_t seq, std::uint32_t cap, const Lane& own);
  LanePlan home_turn(std::uint32_t seq, std::uint32_t cap);
  bool usable(Time now, std::uint32_t position) const;
  // Candidates are numbered home first, then borrowable; kNone: not one of this shard's.
  std::uint32_t position_of(std::uint32_t aggregator) const;
  std::uint32_t index_at(std::uint32_t position) const;

  bool enabled_ = false;
  PlannerSetup setup_;
  std::vector<std::uint32_t> home_;  // this shard's home aggregators
  // This shard's share of the rest of the pool, nearest below the home slice first, as many
  // as could ever be in flight (two windows' worth).
  std::vector<Borrowable> borrowable_;
  std::unordered_map<std::uint32_t, std::uint32_t> borrow_position_;  // index -> borrowable_
  std::vector<Neighbour> neighbours_;
  std::vector<Lane> lanes_;  // the plan each lane carries, as last sent
  double borrow_ = 0;        // borrowed aggregators this shard may use
  bool planned_any_ = false;  // a result has planned a lane
  // After a home change, the turns the plans already sent were made on (home_turn()).
  struct OldTurns {
    std::vector<std::uint32_t> home;  // this shard's home aggregators then
    std::uint32_t cap = 0;            // the cap then
    std::uint32_t last = 0;           // the last seq this PS had planned
  };
  std::optional<OldTurns> old_turns_;
  std::vector<std::uint32_t> gap_;  // choose()'s scratch, per candidate
  std::vector<std::uint8_t> clash_;
};

}  // namespace atp::engines
