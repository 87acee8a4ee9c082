#include "engines/ps/aggregator_planner.h"

#include <algorithm>
#include <limits>

namespace atp::engines {

namespace {
// A neighbour found busy again is left alone twice as long, up to this: its owner is evidently
// busy, and each probe costs the PS link a packet per worker.
constexpr Duration kLongestBackoff = 16 * kBorrowBackoff;
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
}  // namespace

AggregatorPlanner::AggregatorPlanner(const PlannerSetup& setup) : setup_(setup) {
  if (setup.pool == 0 || setup.pool > proto::kMaxPlannedPool || setup.shards == 0 ||
      setup.shard >= setup.shards || setup.window == 0 || setup.window % setup.shards != 0 ||
      setup.lag < setup.window || (setup.lag & (setup.lag - 1)) != 0)
    return;
  lanes_.resize(setup.lag);
  place_home();
}

void AggregatorPlanner::set_home(const HomeSlice& home) {
  if (lanes_.empty()) return;  // an invalid setup plans nothing, whatever its home
  // The plans already sent keep the turns they were made on (home_turn()).
  if (planned_any_ && !setup_.borrow && !home_.empty()) {
    std::uint32_t last = 0;
    bool any = false;
    for (const Lane& l : lanes_)
      if (l.planned && (!any || seq_distance(l.seq, last) > 0)) last = l.seq, any = true;
    old_turns_ = OldTurns{home_, cap_now(), last};
  }
  setup_.home_first = home.first;
  setup_.home_count = home.count;
  place_home();
}

// Seq `seq`'s home turn and cap. After a home change the plans already sent keep the old
// turns, and the workers send them as planned. So a seq at or before the last one this PS had
// planned keeps the old turns too (a result that came back late plans it among neighbours
// planned on them), and a seq after it on the new turns gets its cap cut to the distance back to
// the nearest seq that may have been planned on the old turns with the same aggregator (by any
// PS: whatever was planned up to a lag past this one's last), so the two are never in flight
// together. Without it, a home grown by lending let a seq leave while the seq that last had its
// aggregator under the old turns was still there: the first fragments met it and went to the
// PS, the later ones claimed the aggregator once it was freed, and that partial sum stayed until
// a timeout flushed it, sending every later seq on the aggregator to the PS meanwhile, one
// packet per worker (random scenarios, issue 48, seed 1001: a job at 0.36 of static slices for
// 7 ms). Left: a worker that lost a plan assumes the new home's turn with its full cap.
LanePlan AggregatorPlanner::home_turn(std::uint32_t seq, std::uint32_t cap) {
  const auto turn_of = [&](const std::vector<std::uint32_t>& home, std::uint32_t s) {
    return home[(s / setup_.shards) % home.size()];
  };
  if (old_turns_) {
    const OldTurns& old = *old_turns_;
    if (seq_distance(seq, old.last) <= 0) return {turn_of(old.home, seq), old.cap};
    const std::uint32_t maybe_old = old.last + setup_.lag;
    if (seq_distance(seq, maybe_old + setup_.window) > 0) {
      old_turns_.reset();  // nothing within any cap of it was planned on the old turns
    } else {
      const std::uint32_t aggregator = turn_of(home_, seq);
      for (std::uint32_t k = 1; k < cap; ++k) {
        const std::uint32_t earlier = seq - k * setup_.shards;
        if (seq_distance(earlier, maybe_old) <= 0 && turn_of(old.home, earlier) == aggregator)
          return {aggregator, k};
      }
      return {aggregator, cap};
    }
  }
  return {turn_of(home_, seq), cap};
}

void AggregatorPlanner::place_home() {
  const std::uint32_t pool = setup_.pool;
  const HomeSlice home{std::min(setup_.home_first, pool),
                       std::min(setup_.home_count, pool - std::min(pool, setup_.home_first)),
                       setup_.shards};
  home_.clear();
  for (std::uint32_t i = 0; i < home.shard_size(setup_.shard); ++i)
    home_.push_back(home.shard_member(setup_.shard, i));
  borrowable_.clear();
  borrow_position_.clear();
  if (setup_.borrow) find_borrowable(home);
  borrow_ = std::min<double>(borrow_, borrowable_.size());
  if (!planned_any_)
    for (std::uint32_t seq = setup_.shard; seq < setup_.lag; seq += setup_.shards)
      if (const auto first = home.initial(seq, setup_.window))
        lanes_[seq] = {true, seq, first->aggregator, first->in_flight_cap};
  enabled_ = !home_.empty() || !borrowable_.empty();
}

// The rest of the pool, from just below the home slice downward (around the end): the
// previous job's home from its top, which its owner, taking its home from the bottom, uses
// least. Admission cuts the pool into equal slices, so a neighbour's slice is the home's size.
void AggregatorPlanner::find_borrowable(const HomeSlice& home) {
  const std::uint32_t pool = setup_.pool;
  const std::uint32_t most = 2 * setup_.window / setup_.shards;  // more are never in flight
  const std::uint32_t slice = std::max(1u, home.count);
  for (std::uint32_t step = 1; step <= pool && borrowable_.size() < most; ++step) {
    const std::uint32_t i = (home.first + pool - step) % pool;
    if (i >= home.first && i < home.first + home.count) continue;
    if (i % setup_.shards != setup_.shard) continue;
    borrow_position_[i] = static_cast<std::uint32_t>(borrowable_.size());
    borrowable_.push_back({i, i / slice});
  }
  std::uint32_t blocks = 0;
  for (const Borrowable& b : borrowable_) blocks = std::max(blocks, b.block + 1);
  neighbours_.assign(blocks, Neighbour{0, kBorrowBackoff, std::numeric_limits<Time>::min() / 2});
}

PlannedResult AggregatorPlanner::on_result(Time now, std::uint32_t seq,
                                           std::uint32_t aggregator, bool collided) {
  const bool borrowed = learn(now, aggregator % setup_.pool, collided);
  const std::uint32_t next = seq + setup_.lag;
  Lane& lane = lanes_[next & (setup_.lag - 1)];
  const LanePlan plan = choose(now, next, cap_now(), lane);
  lane = {true, next, plan.aggregator, plan.in_flight_cap};
  planned_any_ = true;
  return {plan, borrowed};
}

// Borrowing grows by one aggregator per round of results (a cap's worth) and halves when a
// borrowed aggregator was busy, whose owner's slice is then left alone for a while.
bool AggregatorPlanner::learn(Time now, std::uint32_t aggregator, bool collided) {
  auto it = borrow_position_.find(aggregator);
  const bool borrowed = it != borrow_position_.end();
  if (borrowed) {
    Neighbour& n = neighbours_[borrowable_[it->second].block];
    if (collided) {
      // Quiet for a while since it was last found busy: its owner had left, and is back.
      n.backoff = now - n.last_collided > 4 * n.backoff ? kBorrowBackoff
                                                         : std::min(2 * n.backoff, kLongestBackoff);
      n.busy_until = now + n.backoff;
      n.last_collided = now;
      borrow_ /= 2;
      return true;
    }
  }
  if (collided) return borrowed;  // ours met a borrower's: it backs off when it meets ours
  const double most = std::min<double>(
      borrowable_.size(), setup_.window / setup_.shards -
                              std::min<std::uint32_t>(home_size(), setup_.window / setup_.shards));
  borrow_ = std::min(most, borrow_ + 1.0 / cap_now());
  return borrowed;
}

// In this shard's fragments: the worker sends a seq of this shard only while fewer than the
// cap of them are in flight.
std::uint32_t AggregatorPlanner::cap_now() const {
  const auto cap = home_size() + static_cast<std::uint32_t>(borrow_);
  // Borrowing: at most half the candidates, so some candidate is always clear of the seqs
  // within the cap on both sides (choose()).
  const std::uint32_t most =
      setup_.borrow ? std::max(home_size(), static_cast<std::uint32_t>(
                                                (home_.size() + borrowable_.size()) / 2))
                    : setup_.window / setup_.shards;
  return std::clamp(cap, 1u, std::min(most, setup_.window / setup_.shards));
}

// The first usable candidate, home before borrowed, that no seq of this shard within the cap
// of `seq` uses; if there is none, the one whose last use is furthest back, with the cap cut
// to that distance so the two are never in flight together.
LanePlan AggregatorPlanner::choose(Time now, std::uint32_t seq, std::uint32_t cap,
                                   const Lane& own) {
  // Not borrowing: every seq takes its home's turn, which keeps any home_size() seqs of the
  // shard apart whatever order their results came back in, and is what a worker that lost
  // this result assumes (an enabled planner that does not borrow has a home).
  if (!setup_.borrow) return home_turn(seq, cap);
  const std::uint32_t turn = home_.empty() ? 0 : (seq / setup_.shards) % home_size();
  const std::size_t candidates = home_.size() + borrowable_.size();
  gap_.assign(candidates, kNone);  // this shard's seqs since each one's last use
  clash_.assign(candidates, 0);    // a later seq uses it within that seq's cap
  for (const Lane& l : lanes_) {
    if (!l.planned || &l == &own) continue;
    const std::uint32_t at = position_of(l.aggregator);
    const std::int32_t d = seq_distance(seq, l.seq) / static_cast<std::int32_t>(setup_.shards);
    if (at == kNone || d == 0) continue;
    if (d > 0) gap_[at] = std::min(gap_[at], static_cast<std::uint32_t>(d));
    else if (static_cast<std::uint32_t>(-d) < l.cap) clash_[at] = 1;
  }
  auto free = [&](std::uint32_t at) { return !clash_[at] && usable(now, at) && gap_[at] >= cap; };
  if (!home_.empty() && free(turn)) return {home_[turn], cap};  // the turn first, as above
  std::uint32_t best = kNone;  // furthest back among the usable, then among the rest
  for (std::uint32_t at = 0; at < candidates; ++at) {
    if (free(at)) return {index_at(at), cap};
    if (clash_[at] || (best != kNone && usable(now, best) && !usable(now, at))) continue;
    if (best == kNone || (usable(now, at) && !usable(now, best)) || gap_[at] > gap_[best])
      best = at;
  }
  // Nothing is free (results came back out of order, so later seqs were planned first): the
  // one used furthest back, busy neighbour or not, with the cap cut to that distance, so the
  // worker waits rather than collide with itself. Fewer than 2 x cap candidates are ever
  // taken by the seqs around this one (cap_now()), so there is one.
  if (best != kNone) return {index_at(best), std::clamp(gap_[best], 1u, cap)};
  return {own.planned ? own.aggregator : index_at(0), 1};
}

bool AggregatorPlanner::usable(Time now, std::uint32_t position) const {
  if (position < home_.size()) return true;
  return neighbours_[borrowable_[position - home_.size()].block].busy_until <= now;
}

std::uint32_t AggregatorPlanner::position_of(std::uint32_t aggregator) const {
  if (!home_.empty() && aggregator >= home_.front() && aggregator <= home_.back() &&
      (aggregator - home_.front()) % setup_.shards == 0)
    return (aggregator - home_.front()) / setup_.shards;
  auto it = borrow_position_.find(aggregator);
  return it == borrow_position_.end() ? kNone
                                      : static_cast<std::uint32_t>(home_.size()) + it->second;
}

std::uint32_t AggregatorPlanner::index_at(std::uint32_t position) const {
  return position < home_.size() ? home_[position] : borrowable_[position - home_.size()].index;
}

}  // namespace atp::engines
