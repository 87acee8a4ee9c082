// The PS's aggregator plan (engines/ps/aggregator_planner.h) and the home slice the worker
// shares with it (engines/home_slice.h): the rules the plan promises, checked over long runs
// with results answered out of order.
#include "engines/ps/aggregator_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "engines/home_slice.h"

namespace atp::engines {
namespace {

struct Planned {
  std::uint32_t aggregator = 0;
  std::uint32_t cap = 0;
};

// Plans for `seqs` seqs of the planner's shard: the first lag come from the home's turns (as
// the workers start), each later one from the result `lag` before it. Results are answered in
// a shuffled order within a window, as loss and reordering would return them; `collided`
// says what each result met.
std::map<std::uint32_t, Planned> run_plans(const PlannerSetup& setup, std::uint32_t seqs,
                                           std::mt19937& rng,
                                           const std::function<bool(std::uint32_t)>& collided) {
  AggregatorPlanner planner(setup);
  EXPECT_TRUE(planner.enabled());
  const HomeSlice home{setup.home_first, setup.home_count, setup.shards};
  std::map<std::uint32_t, Planned> plans;
  for (std::uint32_t seq = setup.shard; seq < setup.lag; seq += setup.shards) {
    const auto first = home.initial(seq, setup.window);
    plans[seq] = {first->aggregator, first->in_flight_cap};
  }
  std::vector<std::uint32_t> mine;
  for (std::uint32_t seq = setup.shard; seq < seqs; seq += setup.shards) mine.push_back(seq);
  const std::size_t batch = setup.window / setup.shards;
  for (std::size_t start = 0; start < mine.size(); start += batch) {
    const auto end = mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), start + batch));
    std::shuffle(mine.begin() + static_cast<std::ptrdiff_t>(start), end, rng);
  }
  Time now = 0;
  for (std::uint32_t seq : mine) {
    now += 1000;
    const LanePlan next =
        planner.on_result(now, seq, plans.at(seq).aggregator, collided(seq)).next;
    plans[seq + setup.lag] = {next.aggregator, next.in_flight_cap};
  }
  return plans;
}

// The plan's first rule: two seqs of a shard that may be in flight together (closer, in the
// shard's seqs, than the later one's cap) never share an aggregator.
void expect_no_self_collision(const std::map<std::uint32_t, Planned>& plans,
                              std::uint32_t shards) {
  for (auto later = plans.begin(); later != plans.end(); ++later) {
    ASSERT_GE(later->second.cap, 1u);
    for (auto earlier = plans.begin(); earlier != later; ++earlier) {
      const std::uint32_t apart = (later->first - earlier->first) / shards;
      if (apart >= later->second.cap) continue;
      EXPECT_NE(earlier->second.aggregator, later->second.aggregator)
          << "seqs " << earlier->first << " and " << later->first << " (cap "
          << later->second.cap << ")";
    }
  }
}

TEST(AggregatorPlanner, HomeTurnsKeepEveryNearbySeqApartWhateverTheOrderOfResults) {
  std::mt19937 rng(7);
  const PlannerSetup setup{64, 21, 21, 64, 128, 1, 0, false};
  const auto plans = run_plans(setup, 1500, rng, [](std::uint32_t seq) { return seq % 7 == 0; });
  expect_no_self_collision(plans, 1);
  for (const auto& [seq, p] : plans) {
    EXPECT_GE(p.aggregator, 21u);
    EXPECT_LT(p.aggregator, 42u);
    EXPECT_EQ(p.cap, 21u);  // the whole home, not static's power of two (16)
  }
}

// What a worker that lost a result assumes for the seq it planned (the home's turn) is what
// the PS planned: a lost result costs nothing while the job keeps to its home.
TEST(AggregatorPlanner, ALostPlanIsTheHomesTurn) {
  std::mt19937 rng(3);
  const PlannerSetup setup{96, 64, 32, 64, 128, 1, 0, false};
  const HomeSlice home{64, 32, 1};
  for (const auto& [seq, p] : run_plans(setup, 800, rng, [](std::uint32_t) { return false; })) {
    const auto turn = home.initial(seq, 64);
    EXPECT_EQ(p.aggregator, turn->aggregator) << seq;
    EXPECT_EQ(p.cap, turn->in_flight_cap) << seq;
  }
}

// A home lent more of the pool (control/home_lending.h): plans from then on take the grown
// home's turns with the cap it holds, at most the window; given back, they keep to the own home.
// While plans of the old turns may still be in flight (the lag after the change), a new turn's
// cap is cut so that it never meets one of them: no two seqs that may be in flight together
// share an aggregator across the changes either (without the cut, seq 399 could leave beside
// seqs 357 and 378, which had its aggregator under the turns before).
TEST(AggregatorPlanner, PlansFollowAHomeTheControlPlaneGrowsAndShrinks) {
  AggregatorPlanner planner({64, 21, 21, 64, 128, 1, 0, false});
  Time now = 0;
  std::uint32_t seq = 0;
  std::map<std::uint32_t, Planned> plans;
  for (std::uint32_t s = 0; s < 128; ++s) plans[s] = {21 + s % 21, 21};
  std::uint32_t cut = 0;
  auto plan_round = [&](std::uint32_t first, std::uint32_t count, std::uint32_t cap) {
    for (std::uint32_t end = seq + 256; seq < end; ++seq) {
      const LanePlan p = planner.on_result(now += 1000, seq, plans.at(seq).aggregator, false).next;
      plans[seq + 128] = {p.aggregator, p.in_flight_cap};
      EXPECT_EQ(p.aggregator, first + (seq + 128) % count) << seq;
      EXPECT_LE(p.in_flight_cap, cap) << seq;
      cut += p.in_flight_cap < cap;
      if (end - seq <= 64) EXPECT_EQ(p.in_flight_cap, cap) << seq;  // past any old turn's reach
    }
  };
  plan_round(21, 21, 21);
  EXPECT_EQ(cut, 0u);
  planner.set_home({0, 63, 1});  // alone: the others' homes lent
  plan_round(0, 63, 63);
  EXPECT_GT(cut, 0u);
  planner.set_home({0, 128, 1});  // past the pool: cut to it, and the cap to the window
  plan_round(0, 64, 64);
  planner.set_home({21, 21, 1});  // the others are back
  plan_round(21, 21, 21);
  expect_no_self_collision(plans, 1);
}

// With two PSs each plans only its own seqs (odd and even), yet a seq one PS plans on the new
// turns must not meet a seq the other planned on the old ones; and a late result planning a
// seq among those already planned on the old turns keeps them (review of issue 48's rule).
TEST(AggregatorPlanner, AHomeChangeKeepsEveryPSsSeqsApart) {
  const PlannerSetup setup{64, 0, 3, 8, 16, 1, 0, false};
  AggregatorPlanner ps[2] = {AggregatorPlanner(setup), AggregatorPlanner(setup)};
  std::map<std::uint32_t, Planned> plans;
  for (std::uint32_t s = 0; s < 16; ++s) plans[s] = {s % 3, 3};
  Time now = 0;
  std::uint32_t seq = 0;
  auto results = [&](std::uint32_t count, bool late_one) {
    for (std::uint32_t end = seq + count; seq < end; ++seq) {
      // One result comes back late: the seq after it is answered first.
      const std::uint32_t s = late_one && seq % 8 == 3 ? seq + 1 : late_one && seq % 8 == 4 ? seq - 1 : seq;
      const LanePlan p = ps[s % 2].on_result(now += 1000, s, plans.at(s).aggregator, false).next;
      plans[s + 16] = {p.aggregator, p.in_flight_cap};
    }
  };
  results(40, false);
  for (auto& p : ps) p.set_home({0, 6, 1});  // lent a neighbour's home
  results(40, true);
  for (auto& p : ps) p.set_home({0, 3, 1});  // handed back
  results(40, true);
  expect_no_self_collision(plans, 1);
}

TEST(AggregatorPlanner, ABorrowingShardKeepsItsOwnSeqsApartToo) {
  for (std::uint32_t shard = 0; shard < 2; ++shard) {
    std::mt19937 rng(11 + shard);
    std::bernoulli_distribution busy(0.2);
    const PlannerSetup setup{64, 0, 21, 64, 128, 2, shard, true};
    const auto plans = run_plans(setup, 3000, rng, [&](std::uint32_t) { return busy(rng); });
    expect_no_self_collision(plans, 2);
    for (const auto& [seq, p] : plans) EXPECT_EQ(p.aggregator % 2, shard) << seq;
  }
}

TEST(AggregatorPlanner, BorrowsWhatLooksIdleAndGoesHomeWhenItTurnsOutBusy) {
  std::mt19937 rng(5);
  const PlannerSetup setup{64, 0, 16, 64, 128, 1, 0, true};
  AggregatorPlanner planner(setup);
  auto outside_home = [](const LanePlan& p) { return p.aggregator >= 16; };
  // Every result clean: the budget grows, and seqs go beyond the home.
  std::uint32_t borrowed = 0;
  Time now = 0;
  for (std::uint32_t seq = 0; seq < 2000; ++seq)
    borrowed += outside_home(planner.on_result(now += 1000, seq, seq % 16, false).next);
  EXPECT_GT(planner.borrowing(), 10.0);
  EXPECT_GT(borrowed, 0u);
  // Now every borrowed aggregator is found busy: the plan is back home within a few rounds.
  std::uint32_t late = 0;
  for (std::uint32_t seq = 2000; seq < 4000; ++seq) {
    const LanePlan p = planner.on_result(now += 1000, seq, seq % 64, seq % 64 >= 16).next;
    if (seq >= 2500) late += outside_home(p);
  }
  EXPECT_LT(planner.borrowing(), 1.0);
  EXPECT_EQ(late, 0u);
}

TEST(AggregatorPlanner, PlansNothingItCouldNotCarry) {
  EXPECT_FALSE(AggregatorPlanner({0, 0, 0, 64, 128, 1, 0, false}).enabled());
  EXPECT_FALSE(AggregatorPlanner({proto::kMaxPlannedPool + 1, 0, 8, 64, 128, 1, 0, false}).enabled());
  EXPECT_FALSE(AggregatorPlanner({64, 0, 8, 64, 128, 3, 0, true}).enabled());  // 3 ∤ 64
  EXPECT_TRUE(AggregatorPlanner({64, 0, 8, 64, 128, 1, 0, false}).enabled());
}

TEST(LaneAssignment, TheCapAndIndexRoundTripThroughRemapIndex) {
  const proto::LaneAssignment a{12345, 21};
  const auto b = proto::decode_lane_assignment(proto::encode_lane_assignment(a));
  EXPECT_EQ(b.aggregator, a.aggregator);
  EXPECT_EQ(b.in_flight_cap, a.in_flight_cap);
  EXPECT_EQ(proto::decode_lane_assignment(proto::encode_lane_assignment({7, 5000})).in_flight_cap,
            0u);  // past 4095: no cap
}

TEST(HomeSlice, ShardsSplitTheHomeWithoutOverlap) {
  const HomeSlice home{5, 21, 8};
  std::vector<std::uint32_t> seen;
  for (std::uint32_t shard = 0; shard < 8; ++shard)
    for (std::uint32_t i = 0; i < home.shard_size(shard); ++i) {
      const std::uint32_t a = home.shard_member(shard, i);
      EXPECT_EQ(a % 8, shard);
      seen.push_back(a);
    }
  std::sort(seen.begin(), seen.end());
  std::vector<std::uint32_t> all(21);
  for (std::uint32_t i = 0; i < 21; ++i) all[i] = 5 + i;
  EXPECT_EQ(seen, all);
}

}  // namespace
}  // namespace atp::engines
