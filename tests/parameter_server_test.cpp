#include <set>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <tuple>

#include "engines/ps/parameter_server.h"
#include "engines/recovery_lead.h"
#include "packet_builder.h"
#include "proto/byte_order.h"

namespace atp::engines {
namespace {

using atp::testing::header_of;
using atp::testing::make_packet;
using atp::testing::PacketSpec;
using atp::testing::values_of;
namespace flag = proto::flag;

constexpr NodeId kDown = 50;

// A job of two racks: 2 workers in rack 0, 3 in rack 1.
class ParameterServerTest : public ::testing::Test {
 protected:
  ParameterServerTest() {
    PsJob job{1, {2, 3}, 4, 8, kDown, 0, 16};
    job.ring = 4;  // a ring of one window: the seq-memory tests below count on it
    ps.add_job(job);
  }

  PacketSpec single(std::uint8_t rack, std::uint8_t worker, std::vector<std::int32_t> v) {
    PacketSpec s;
    s.level = proto::Level::parameter_server;
    s.rack = rack;
    s.rack_fan_in = rack == 0 ? 2 : 3;
    s.job_fan_in = 2;
    s.workers = 1u << worker;
    s.values = std::move(v);
    return s;
  }
  PacketSpec rack_sum(std::uint8_t rack, std::vector<std::int32_t> v) {
    PacketSpec s = single(rack, 0, std::move(v));
    s.workers = 0;
    s.racks = 1u << rack;
    return s;
  }
  void send(const PacketSpec& s) {
    auto p = make_packet(s);
    ps.on_packet(0, p, out);
  }
  // Datagrams sent since the last call.
  std::vector<std::vector<std::uint8_t>> sent() {
    std::vector<std::vector<std::uint8_t>> v;
    for (auto& d : out.packets()) {
      EXPECT_EQ(d.to, kDown);
      v.push_back(d.bytes);
    }
    out.clear();
    return v;
  }
  const PsJobCounters& counters() { return *ps.job_counters(1); }

  ParameterServer ps;
  Outbox out;
};

TEST_F(ParameterServerTest, CompletesWhenEveryWorkerIsInAndAnswersDownstream) {
  send(rack_sum(0, {1, 2}));
  send(single(1, 0, {10, 10}));
  send(single(1, 1, {100, 100}));
  EXPECT_TRUE(sent().empty());
  send(single(1, 2, {1000, -1000}));
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  const auto h = header_of(results[0]);
  EXPECT_TRUE(h.has(flag::kResult));
  EXPECT_EQ(values_of(results[0]), (std::vector<std::int32_t>{1111, -888}));
  EXPECT_EQ(counters().completed, 1u);
  EXPECT_EQ(counters().completed_in_network, 0u);
}

TEST_F(ParameterServerTest, OneCompleteSumCountsAsInNetwork) {
  PacketSpec all = rack_sum(0, {3});
  all.racks = 0b11;
  send(all);
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_EQ(counters().completed_in_network, 1u);
}

TEST_F(ParameterServerTest, OverlappingContributionIsDroppedWhole) {
  send(single(1, 0, {10}));
  send(single(1, 2, {30}));
  PacketSpec flush = single(1, 0, {10 + 20});
  flush.workers = 0b011;  // worker 0 again, plus worker 1: overlaps, yet lacks worker 2
  send(flush);
  EXPECT_EQ(counters().duplicates, 1u);
  send(single(1, 1, {20}));
  send(rack_sum(0, {5}));
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 65);
}

TEST_F(ParameterServerTest, LatePacketGetsTheResultAgain) {
  PacketSpec all = rack_sum(0, {3});
  all.racks = 0b11;
  send(all);
  sent();
  PacketSpec late = single(0, 1, {1});
  late.flags = flag::kResend;
  send(late);
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 3);
  EXPECT_EQ(counters().late_results, 1u);
}

// A late copy for one worker is addressed to it alone (the switches send it down its path
// only). The seq's recovery lead asks for every worker (the others wait for it), as do several
// askers at once: their copy goes to every worker and answers every later asker too, until one
// asks again (that copy was lost on its way to it as well).
TEST_F(ParameterServerTest, ALateCopyGoesToItsAskerAloneUnlessTheLeadOrSeveralAsk) {
  PacketSpec all = rack_sum(0, {3});
  all.racks = 0b11;
  send(all);  // seq 0, whose recovery lead is rack 0's worker 0 (recovery_lead.h)
  ASSERT_EQ(header_of(sent().at(0)).workers_bitmap, 0u);  // the result itself: everyone's
  auto late = [&](std::uint8_t rack, std::uint32_t workers, std::uint32_t seq = 0) {
    PacketSpec p = single(rack, 0, {1});
    p.workers = workers;
    p.seq = seq;
    p.flags = flag::kResend;
    send(p);
    return sent();
  };
  auto copy = late(1, 0b001);
  ASSERT_EQ(copy.size(), 1u);
  proto::Header h;
  ASSERT_EQ(proto::decode(copy[0], h), proto::DecodeError::ok);
  EXPECT_TRUE(h.is_addressed_result());
  EXPECT_EQ(h.rack, 1);
  EXPECT_EQ(h.workers_bitmap, 0b001u);
  EXPECT_EQ(h.rack_fan_in, 3);  // rack 1's, so that the bitmap decodes
  EXPECT_EQ(values_of(copy[0])[0], 3);
  copy = late(1, 0b010);  // another asker: its own copy, the first went to worker 0 only
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 0b010u);
  copy = late(0, 0b01);  // the lead: one copy to all
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 0u);
  EXPECT_TRUE(late(1, 0b100).empty());  // covered by the copy to all just sent
  copy = late(1, 0b001);                // asking again: it lost that copy too
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 0b001u);
  PacketSpec q = single(1, 1, {});
  q.kind = proto::Kind::query;
  send(q);  // a query is answered the same way
  copy = sent();
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 0b010u);
  EXPECT_EQ(counters().late_results, 4u);
  EXPECT_EQ(counters().answered_queries, 1u);
  EXPECT_EQ(counters().late_asks_covered, 1u);

  all.seq = 1;
  send(all);
  sent();
  copy = late(1, 0b011, 1);  // two at once (a flush of part of rack 1): one copy to all
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 0u);
}

// A reduce-scatter shard's seq (its fragments name an owner, protocol.md §8.1): the values go
// to the owner alone and a header-only done copy to every worker, and so on for late copies;
// a contribution naming another owner, or a worker outside the job, is refused.
TEST_F(ParameterServerTest, AShardsValuesGoToItsOwnerAloneAndEveryoneElseGetsADoneCopy) {
  const std::uint32_t owner = proto::encode_result_owner({1, 2});
  auto owned = [&](PacketSpec p) {
    p.remap_index = owner;
    return p;
  };
  send(owned(rack_sum(0, {1, 2})));
  PacketSpec other_owner = single(1, 0, {10, 10});
  other_owner.remap_index = proto::encode_result_owner({0, 1});
  send(other_owner);
  PacketSpec plain = single(1, 0, {10, 10});  // an allreduce's fragment for the same seq
  send(plain);
  PacketSpec stranger = single(1, 0, {10, 10});
  stranger.seq = 1;
  stranger.remap_index = proto::encode_result_owner({1, 3});  // rack 1 has 3 workers
  send(stranger);
  PacketSpec garbled = single(1, 0, {10, 10});
  garbled.seq = 2;
  garbled.remap_index = proto::kResultOwner | 1u << 20;  // the owner's form, with stray bits
  send(garbled);
  EXPECT_EQ(counters().rejected, 4u);
  send(owned(single(1, 0, {10, 10})));
  send(owned(single(1, 1, {100, 100})));
  EXPECT_TRUE(sent().empty());
  send(owned(single(1, 2, {1000, -1000})));
  auto results = sent();
  ASSERT_EQ(results.size(), 2u);
  const auto done = header_of(results[0]);
  EXPECT_TRUE(done.has(flag::kResult));
  EXPECT_EQ(done.value_count, 0u);
  EXPECT_EQ(done.workers_bitmap, 0u);  // to every worker
  const auto full = header_of(results[1]);
  EXPECT_TRUE(full.is_addressed_result());
  EXPECT_EQ(full.rack, 1);
  EXPECT_EQ(full.workers_bitmap, 1u << 2);
  EXPECT_EQ(values_of(results[1]), (std::vector<std::int32_t>{1111, -888}));
  EXPECT_EQ(counters().done_copies, 1u);

  auto query_from = [&](std::uint8_t rack, std::uint8_t worker) {
    PacketSpec q = single(rack, worker, {});
    q.kind = proto::Kind::query;
    send(q);
    return sent();
  };
  auto copy = query_from(1, 1);  // not the owner: a done copy, to it alone
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(header_of(copy[0]).value_count, 0u);
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 1u << 1);
  copy = query_from(1, 2);  // the owner: its values
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(values_of(copy[0]), (std::vector<std::int32_t>{1111, -888}));
  EXPECT_EQ(header_of(copy[0]).workers_bitmap, 1u << 2);
  copy = query_from(0, 0);  // the seq's recovery lead asks for everyone: both again
  ASSERT_EQ(copy.size(), 2u);
  EXPECT_EQ(header_of(copy[0]).value_count, 0u);
  EXPECT_EQ(header_of(copy[1]).value_count, 2u);
}

// A query is 44 bytes and its answer a kept result (multicast to the job's members until late
// copies were addressed): a member asking without end drew 20x its bytes out of the fabric
// (issue 49 item 1). Each worker's answers are budgeted (4 rings at once, refilled at 4 rings
// per 50 ms); another worker's queries are taken all the same.
TEST_F(ParameterServerTest, AnswersToOneWorkersQueriesAreBudgeted) {
  PacketSpec all = rack_sum(0, {3});
  all.racks = 0b11;
  send(all);
  sent();
  auto ask = [&](std::uint8_t rack, std::uint8_t worker, Time at) {
    PacketSpec q = single(rack, worker, {});
    q.kind = proto::Kind::query;
    auto p = make_packet(q);
    ps.on_packet(at, p, out);
    return sent().size();
  };
  std::size_t answered = 0;
  for (int k = 0; k < 100; ++k) answered += ask(0, 0, kSecond);
  EXPECT_EQ(answered, 16u);  // 4 rings of 4
  EXPECT_EQ(counters().queries_over_budget, 84u);
  // Another worker: within its own budget (worker 0 of rack 0 leads seq 0, so its copies went
  // to every worker, the last one covering this ask).
  ask(1, 2, kSecond);
  EXPECT_EQ(counters().queries_over_budget, 84u);
  EXPECT_EQ(counters().late_asks_covered, 1u);
  EXPECT_EQ(ask(0, 0, kSecond + 25 * kMillisecond), 1u);  // half a period refilled half
  answered = 0;
  for (int k = 0; k < 20; ++k) answered += ask(0, 0, kSecond + 25 * kMillisecond);
  EXPECT_EQ(answered, 7u);
}

// A job restarted on the same PS (all workers anew, seq and tensor counters from 0) must not
// be answered with the results its earlier run left: without runs it got them, silently wrong.
TEST_F(ParameterServerTest, RunsNeverMeetEachOthersState) {
  PacketSpec all = rack_sum(0, {3});
  all.racks = 0b11;
  send(all);  // run 0 completes seq 0; its result is kept for late resends
  sent();
  PacketSpec next = single(0, 0, {10});
  next.tensor = proto::wire_tensor(1, 0);  // run 1's first fragment at seq 0
  send(next);
  EXPECT_TRUE(sent().empty());  // no stale result: a new sum starts
  PacketSpec rest = rack_sum(1, {5});
  rest.tensor = next.tensor;
  send(rest);
  PacketSpec last = single(0, 1, {20});
  last.tensor = next.tensor;
  send(last);
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 35);
  EXPECT_EQ(header_of(results[0]).tensor, next.tensor);

  // A delayed resend of run 0 is neither answered with run 1's result nor summed into it:
  // it displaces run 1's entry (run 1's resends would rebuild it).
  PacketSpec old = single(0, 1, {1});
  old.flags = flag::kResend;
  send(old);
  for (const auto& p : sent()) {  // at most requests for run 0's missing workers
    EXPECT_TRUE(header_of(p).is_resend_request());
    EXPECT_EQ(header_of(p).tensor, old.tensor);
  }
  PacketSpec old_rest = rack_sum(1, {2});
  send(old_rest);
  PacketSpec old_first = single(0, 0, {3});
  send(old_first);
  results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 6);  // run 0's own values only
  EXPECT_EQ(header_of(results[0]).tensor, 0u);
}

// The start-up handshake (run_registry.h): one run per launch, answered once every rank asked.
class RunHandshake : public ParameterServerTest {
 protected:
  using Ask = std::tuple<std::uint8_t, std::uint8_t, std::uint32_t>;  // rack, bit, nonce
  RunHandshake() { ps.add_job({1, {2, 3}, 4, 8, kDown, 0, 16, 0, /*first_run=*/700}); }
  struct Told {
    std::uint8_t rack;
    std::uint32_t bit;
    std::uint32_t nonce;
    std::uint16_t run;
    bool refused = false;
    bool operator==(const Told&) const = default;
  };
  // The answers a join of worker (rack, bit) with `nonce` at `now` (ms) sends; with `claimed`,
  // a join claiming that run (a launcher's run id).
  std::vector<Told> join(std::uint8_t rack, std::uint8_t bit, std::uint32_t nonce, Time now_ms,
                         std::optional<std::uint16_t> claimed = std::nullopt) {
    PacketSpec s = single(rack, bit, {});
    s.kind = proto::Kind::join;
    s.seq = nonce;
    if (claimed) s.remap_index = proto::kRunClaim | *claimed;
    auto p = make_packet(s);
    ps.on_packet(now_ms * kMillisecond, p, out);
    std::vector<Told> told;
    for (const auto& bytes : sent()) {
      const proto::Header h = header_of(bytes);
      EXPECT_EQ(h.kind, proto::Kind::joined);
      EXPECT_EQ(h.tensor & 0xFFFFu, 0u);
      told.push_back({h.rack, static_cast<std::uint32_t>(std::countr_zero(h.workers_bitmap)),
                      h.seq, proto::run_of(h.tensor), h.remap_index == proto::kRunRefused});
    }
    return told;
  }
  // Every rank asks at `now_ms` (in rank order) with its nonce; what the last join sent.
  std::vector<Told> launch(std::vector<std::uint32_t> nonces, Time now_ms) {
    const std::vector<std::pair<std::uint8_t, std::uint8_t>> ranks = {
        {0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}};
    std::vector<Told> told;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      told = join(ranks[i].first, ranks[i].second, nonces[i], now_ms);
      if (i + 1 < ranks.size() && !told.empty()) return told;  // answered before all asked
    }
    return told;
  }
  static std::vector<Told> everyone(std::uint16_t run, std::vector<std::uint32_t> nonces) {
    return {{0, 0, nonces[0], run}, {0, 1, nonces[1], run}, {1, 0, nonces[2], run},
            {1, 1, nonces[3], run}, {1, 2, nonces[4], run}};
  }
};

TEST_F(RunHandshake, EveryWorkerOfALaunchGetsOneRunOnceAllAskedTwice) {
  EXPECT_TRUE(join(0, 0, 11, 0).empty());
  EXPECT_TRUE(join(0, 1, 12, 0).empty());
  EXPECT_TRUE(join(1, 0, 13, 0).empty());
  EXPECT_TRUE(join(0, 1, 12, 100).empty());  // a repeat while waiting
  EXPECT_TRUE(join(1, 1, 14, 200).empty());
  EXPECT_TRUE(join(1, 2, 15, 300).empty());  // all five asked: now each must ask once more
  EXPECT_TRUE(join(0, 0, 11, 500).empty());
  EXPECT_TRUE(join(0, 1, 12, 500).empty());
  EXPECT_TRUE(join(1, 0, 13, 500).empty());
  EXPECT_TRUE(join(1, 1, 14, 500).empty());
  EXPECT_EQ(join(1, 2, 15, 500), everyone(700, {11, 12, 13, 14, 15}));
  EXPECT_EQ(join(0, 1, 12, 600), (std::vector<Told>{{0, 1, 12, 700}}));  // its answer was lost
  EXPECT_EQ(counters().runs_started, 0u);
  EXPECT_EQ(ps.entries_in_use(1), 0u);  // the handshake holds no aggregation state
}

TEST_F(RunHandshake, ARelaunchGetsTheNextRunAndLateJoinsOfTheLastCannotSplitIt) {
  EXPECT_TRUE(launch({11, 12, 13, 14, 15}, 0).empty());
  EXPECT_EQ(launch({11, 12, 13, 14, 15}, 500), everyone(700, {11, 12, 13, 14, 15}));
  EXPECT_TRUE(join(1, 2, 25, 5000).empty());  // a new process for rank 4: run 701 begins
  EXPECT_EQ(counters().runs_started, 1u);
  // A late join of the first launch is told its own run, and joins nothing.
  EXPECT_EQ(join(0, 1, 12, 5000), (std::vector<Told>{{0, 1, 12, 700}}));
  EXPECT_TRUE(launch({21, 22, 23, 24, 25}, 5100).empty());
  EXPECT_EQ(launch({21, 22, 23, 24, 25}, 5600), everyone(701, {21, 22, 23, 24, 25}));
  EXPECT_EQ(counters().runs_started, 1u);
}

// Issue 49 item 8: a launcher's run id used again by another launch on the same daemons was
// answered with the last launch's kept results (400 floats: a silent wrong sum). A given run is
// claimed: each rank of its launch is told it (again, if its answer was lost), another
// launch's claim is refused, and so is a claim of a run the handshake handed out; the
// handshake never hands out a claimed one.
TEST_F(RunHandshake, ARunIdAnotherLaunchUsedIsRefused) {
  EXPECT_EQ(join(0, 0, 11, 0, 5), (std::vector<Told>{{0, 0, 11, 5}}));
  EXPECT_EQ(join(1, 2, 15, 0, 5), (std::vector<Told>{{1, 2, 15, 5}}));
  EXPECT_EQ(join(0, 0, 11, 50, 5), (std::vector<Told>{{0, 0, 11, 5}}));  // its answer was lost
  EXPECT_EQ(join(0, 0, 21, 9000, 5), (std::vector<Told>{{0, 0, 21, 5, true}}));  // a relaunch
  // A rank no one claimed the run for yet is told it: it may be the first launch's slowest (and
  // no seq of the run completed without it, so no kept result can answer it).
  EXPECT_EQ(join(1, 1, 24, 9000, 5), (std::vector<Told>{{1, 1, 24, 5}}));
  EXPECT_EQ(counters().runs_refused, 1u);
  EXPECT_EQ(launch({31, 32, 33, 34, 35}, 10000), std::vector<Told>{});
  EXPECT_EQ(launch({31, 32, 33, 34, 35}, 10500), everyone(700, {31, 32, 33, 34, 35}));
  EXPECT_EQ(join(0, 0, 41, 11000, 700), (std::vector<Told>{{0, 0, 41, 700, true}}));
  EXPECT_EQ(join(0, 0, 51, 12000, 701), (std::vector<Told>{{0, 0, 51, 701}}));  // claimed
  EXPECT_TRUE(join(1, 2, 65, 13000).empty());  // a new launch by handshake: not 701
  EXPECT_TRUE(launch({61, 62, 63, 64, 65}, 13100).empty());
  EXPECT_EQ(launch({61, 62, 63, 64, 65}, 13600), everyone(702, {61, 62, 63, 64, 65}));
}

// A launch dies before all its workers asked; the next launch must not share a run with the
// dead one's worker (which, answered, would have sent fragments on it).
TEST_F(RunHandshake, AWorkerOfALaunchThatDiedHalfStartedNeverJoinsTheNextOnesRun) {
  EXPECT_TRUE(join(0, 0, 31, 0).empty());  // launch C: only rank 0 asks, then dies
  // Launch D a second later: C's join still looks recent, but C's rank 0 cannot ask again, so
  // the barrier does not close on it.
  for (const auto& [rack, bit, nonce] : std::vector<Ask>{{0, 1, 42}, {1, 0, 43}, {1, 1, 44}, {1, 2, 45}})
    EXPECT_TRUE(join(rack, bit, nonce, 1000).empty());
  for (const auto& [rack, bit, nonce] : std::vector<Ask>{{0, 1, 42}, {1, 0, 43}, {1, 1, 44}, {1, 2, 45}})
    EXPECT_TRUE(join(rack, bit, nonce, 1500).empty());
  // D's rank 0 arrives while C's join is under 3 s old: contested until C's is surely gone,
  // 3 s after C's last join.
  EXPECT_TRUE(join(0, 0, 41, 2000).empty());
  EXPECT_TRUE(launch({41, 42, 43, 44, 45}, 2500).empty());
  EXPECT_TRUE(launch({41, 42, 43, 44, 45}, 3000).empty());  // uncontested now: confirming
  EXPECT_EQ(launch({41, 42, 43, 44, 45}, 3500), everyone(700, {41, 42, 43, 44, 45}));
  EXPECT_EQ(counters().runs_started, 0u);
}

// Stray joins of earlier launches (duplicates, or a worker whose answers keep getting lost)
// are told their own run, however many launches back, and never start or enter a launch.
TEST_F(RunHandshake, JoinsOfEarlierLaunchesAreToldTheirOwnRun) {
  for (std::uint16_t n = 0; n < 3; ++n) {
    const std::uint32_t base = 100 * (n + 1);
    const Time t = 10'000 * n;
    EXPECT_TRUE(launch({base + 1, base + 2, base + 3, base + 4, base + 5}, t).empty());
    EXPECT_EQ(launch({base + 1, base + 2, base + 3, base + 4, base + 5}, t + 500),
              everyone(700 + n, {base + 1, base + 2, base + 3, base + 4, base + 5}));
  }
  EXPECT_EQ(join(1, 1, 104, 20'600), (std::vector<Told>{{1, 1, 104, 700}}));
  EXPECT_EQ(join(0, 0, 201, 20'600), (std::vector<Told>{{0, 0, 201, 701}}));
  EXPECT_EQ(join(0, 0, 301, 20'600), (std::vector<Told>{{0, 0, 301, 702}}));
  EXPECT_EQ(counters().runs_started, 2u);
}

// Two live processes for one rank (a half-started launch still waiting, and its relaunch):
// no answer while both ask; once one is gone, the other's launch gets the run.
TEST_F(RunHandshake, TwoLiveProcessesForOneRankGetNoRunUntilOneIsGone) {
  for (Time t = 0; t <= 6000; t += 500) {
    EXPECT_TRUE(join(0, 0, 51, t).empty());  // the leftover process keeps asking
    EXPECT_TRUE(launch({61, 62, 63, 64, 65}, t + 250).empty());
  }
  // The leftover stops (its deadline); three seconds later the relaunch is alone.
  EXPECT_TRUE(launch({61, 62, 63, 64, 65}, 8000).empty());
  EXPECT_TRUE(launch({61, 62, 63, 64, 65}, 9300).empty());  // settled: confirming
  EXPECT_EQ(launch({61, 62, 63, 64, 65}, 9800), everyone(700, {61, 62, 63, 64, 65}));
}

TEST_F(ParameterServerTest, OnlyTheFirstServerOfAJobHandsOutRuns) {
  ParameterServer second;
  PsJob shard{1, {2, 3}, 4, 8, kDown, /*ps_index=*/1, 16};
  shard.parameter_servers = 2;
  second.add_job(shard);
  PacketSpec s = single(0, 0, {});
  s.kind = proto::Kind::join;
  s.ps_index = 1;
  auto p = make_packet(s);
  second.on_packet(0, p, out);
  EXPECT_TRUE(out.packets().empty());
  EXPECT_EQ(second.job_counters(1)->rejected, 1u);
}

std::int32_t float_bits(float f) {
  std::int32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST_F(ParameterServerTest, OverflowFragmentSwitchesTheSeqToFloats) {
  send(rack_sum(0, {7}));  // integers so far: discarded once floats are needed
  PacketSpec f = single(1, 0, {float_bits(1.5f)});
  f.flags = flag::kFloatPayload;
  send(f);
  auto requests = sent();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(header_of(requests[0]).has(flag::kFloatRequest));
  EXPECT_EQ(counters().float_fallbacks, 1u);

  send(single(1, 1, {3}));  // an integer straggler: ask again
  EXPECT_EQ(sent().size(), 1u);

  const float values[5] = {0.25f, -1.0f, 1.5f, 2.0f, 1e30f};
  const std::pair<int, int> workers[5] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}};
  for (int i = 0; i < 5; ++i) {
    if (workers[i] == std::make_pair(1, 0)) continue;  // already in
    PacketSpec s = single(static_cast<std::uint8_t>(workers[i].first),
                          static_cast<std::uint8_t>(workers[i].second), {float_bits(values[i])});
    s.flags = flag::kFloatPayload;
    send(s);
  }
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  const auto h = header_of(results[0]);
  EXPECT_TRUE(h.has(flag::kResult));
  EXPECT_TRUE(h.has(flag::kFloatPayload));
  const double expected = 0.25 + -1.0 + 1.5 + 2.0 + 1e30f;
  EXPECT_EQ(values_of(results[0])[0], float_bits(static_cast<float>(expected)));
}

TEST_F(ParameterServerTest, WrappedSumMeansFloats) {
  PacketSpec w = rack_sum(0, {1});
  w.flags = flag::kWrapped;
  send(w);
  auto r = sent();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(header_of(r[0]).has(flag::kFloatRequest));
}

TEST_F(ParameterServerTest, SumBeyondInt32MeansFloats) {
  send(rack_sum(0, {2'000'000'000}));
  send(rack_sum(1, {2'000'000'000}));
  auto r = sent();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(header_of(r[0]).has(flag::kFloatRequest));
}

TEST_F(ParameterServerTest, MemoryStaysWithinTwoEntriesPerSlot) {
  // Four workers' worth of seqs run far past the window; nothing accumulates.
  for (std::uint32_t seq = 0; seq < 1000; ++seq) {
    PacketSpec all = rack_sum(0, {1});
    all.racks = 0b11;
    all.seq = seq;
    send(all);
    EXPECT_LE(ps.entries_in_use(1), 2u * 4);
  }
  EXPECT_EQ(counters().completed, 1000u);
}

// By default the workers' ring is 16 windows: the PS keeps two entries per ring slot, and a
// seq's result stays until the seq a ring later (not a window later) proves it delivered.
TEST(ParameterServerRing, EntriesFollowTheRingNotTheWindow) {
  ParameterServer ps;
  PsJob job{1, {2}, 4, 8, kDown, 0, 16};  // window 4, ring 0: 64
  ps.add_job(job);
  Outbox out;
  auto both = [&](std::uint32_t seq) {
    PacketSpec s;
    s.level = proto::Level::parameter_server;
    s.rack_fan_in = 2;
    s.job_fan_in = 1;
    s.workers = 0b11;
    s.seq = seq;
    s.values = {1};
    auto p = make_packet(s);
    ps.on_packet(0, p, out);
  };
  for (std::uint32_t seq = 0; seq < 64; ++seq) both(seq);
  EXPECT_EQ(ps.job_counters(1)->completed, 64u);
  EXPECT_EQ(ps.entries_in_use(1), 64u);  // a window later proves nothing: all kept
  both(64);  // a ring later: seq 0 is delivered everywhere
  EXPECT_EQ(ps.entries_in_use(1), 64u);
  for (std::uint32_t seq = 65; seq < 1000; ++seq) {
    both(seq);
    ASSERT_LE(ps.entries_in_use(1), 2u * 64);
  }
  job.ring = 2;  // below the window
  EXPECT_THROW(ps.add_job(job), std::invalid_argument);
}

TEST_F(ParameterServerTest, ResultIsFreedOnceEveryWorkerMovedOn) {
  PacketSpec all = rack_sum(0, {1});
  all.racks = 0b11;
  send(all);
  EXPECT_EQ(ps.entries_in_use(1), 1u);
  // seq 4 (= 0 + window) from every worker proves they all have seq 0's result.
  PacketSpec next = rack_sum(0, {1});
  next.seq = 4;
  send(next);
  EXPECT_EQ(ps.entries_in_use(1), 2u);
  next = rack_sum(1, {1});
  next.seq = 4;
  send(next);
  EXPECT_EQ(ps.entries_in_use(1), 1u);
  // A straggling copy of seq 0 is stale now.
  send(single(0, 0, {1}));
  EXPECT_EQ(counters().stale, 1u);
}

// Every result names where its slot's next seq aggregates (aggregator_planner.h): in the job's
// home slice while that holds the seqs in flight, each with its own aggregator.
TEST_F(ParameterServerTest, EveryResultPlansItsSlotsNextSeqInTheJobsHome) {
  ParameterServer home_ps;
  PsJob job{1, {2, 3}, 4, 8, kDown, 0, 16};
  job.home = {4, 4, 1};
  home_ps.add_job(job);
  std::set<std::uint32_t> planned;
  for (std::uint32_t seq = 0; seq < 4; ++seq) {
    PacketSpec all = rack_sum(0, {1});
    all.racks = 0b11;
    all.seq = seq;
    all.aggregator = 4 + seq;
    home_ps.on_packet(0, make_packet(all), out);
  }
  for (const auto& bytes : sent()) {
    const proto::Header h = header_of(bytes);
    ASSERT_TRUE(h.has(flag::kRemap));
    const proto::LaneAssignment next = proto::decode_lane_assignment(h.remap_index);
    EXPECT_GE(next.aggregator, 4u);
    EXPECT_LT(next.aggregator, 8u);
    EXPECT_EQ(next.in_flight_cap, 4u);
    planned.insert(next.aggregator);
  }
  EXPECT_EQ(planned.size(), 4u);
  EXPECT_EQ(home_ps.job_counters(1)->plans, 4u);
  EXPECT_EQ(home_ps.job_counters(1)->borrowed, 0u);
}

TEST_F(ParameterServerTest, RejectsWhatDisagreesWithTheJob) {
  PacketSpec wrong = single(1, 0, {1});
  wrong.rack_fan_in = 2;  // rack 1 has 3 workers
  send(wrong);
  EXPECT_EQ(counters().rejected, 1u);
  PacketSpec shard = single(0, 0, {1});
  shard.ps_index = 1;
  send(shard);
  EXPECT_EQ(ps.counters().misrouted, 1u);
  PacketSpec stranger = single(0, 0, {1});
  stranger.job = 9;
  send(stranger);
  EXPECT_EQ(ps.counters().unknown_job, 1u);
  std::vector<std::uint8_t> junk(3, 1);
  ps.on_packet(0, junk, out);
  EXPECT_EQ(ps.counters().malformed, 1u);
  EXPECT_TRUE(sent().empty());
}

TEST(ParameterServerConfig, RejectsBadJobs) {
  ParameterServer ps;
  EXPECT_THROW(ps.add_job({1, {}, 4, 8, 0}), std::invalid_argument);
  EXPECT_THROW(ps.add_job({1, {0}, 4, 8, 0}), std::invalid_argument);
  EXPECT_THROW(ps.add_job({1, {2}, 6, 8, 0}), std::invalid_argument);
  EXPECT_THROW(ps.add_job({1, {2}, 4, 0, 0}), std::invalid_argument);
  PsJob beyond{1, {2}, 4, 8, 0, /*ps_index=*/2};
  beyond.parameter_servers = 2;  // shards 0 and 1 only
  EXPECT_THROW(ps.add_job(beyond), std::invalid_argument);
  beyond.ps_index = 1;
  EXPECT_NO_THROW(ps.add_job(beyond));
}

// A worker's result query (the header alone, engines.md §3.6): the kept result if the seq is
// complete; else a request naming the asker if the PS lacks its values (again, even if it was
// asked before: its resend was lost), and whatever else the seq lacks, once each; with nothing
// of the seq here, the asker, whose resend flushes its switches.
TEST_F(ParameterServerTest, AQueryGetsTheKeptResultOrAsksForWhatTheSeqLacks) {
  auto query = [&](std::uint8_t rack, std::uint8_t worker) {
    PacketSpec q = single(rack, worker, {});
    q.kind = proto::Kind::query;
    return q;
  };
  auto only_request = [&](std::uint8_t rack, std::uint32_t workers) {
    auto asked = sent();
    ASSERT_EQ(asked.size(), 1u);
    const auto h = header_of(asked[0]);
    EXPECT_TRUE(h.is_resend_request());
    EXPECT_EQ(h.rack, rack);
    EXPECT_EQ(h.workers_bitmap, workers);
    EXPECT_EQ(h.seq, 0u);
    EXPECT_EQ(h.value_count, 0);
  };
  send(query(1, 2));  // nothing of the seq here: the asker's resend flushes its switches
  only_request(1, 0b100);
  send(rack_sum(1, {5}));
  send(single(0, 1, {2}));
  send(query(0, 0));  // its own values are what the seq lacks
  only_request(0, 0b01);
  send(query(0, 0));  // asked again: the resend it was asked for was lost
  only_request(0, 0b01);
  send(query(0, 1));  // held itself: the one missing was asked already
  EXPECT_TRUE(sent().empty());
  send(single(0, 0, {1}));
  ASSERT_EQ(sent().size(), 1u);  // the result
  send(query(1, 0));  // lost on its way down to rack 1's worker 0: sent again
  auto again = sent();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(header_of(again[0]).has(flag::kResult));
  EXPECT_EQ(values_of(again[0])[0], 8);
  EXPECT_EQ(counters().queries, 5u);
  EXPECT_EQ(counters().answered_queries, 1u);
  EXPECT_EQ(counters().late_results, 0u);  // no values were resent
  EXPECT_EQ(counters().contributions, 3u);  // a query adds nothing
}

// Each result says which of its shard's 16 seqs before it had their result sent: a worker
// missing one of those asks for it instead of resending values (engines.md §3.6).
TEST(ParameterServerResultsBehind, AResultNamesTheEarlierResultsOfItsShardSentSoFar) {
  ParameterServer ps;
  PsJob job{2, {1}, 64, 8, kDown, /*ps_index=*/1, 0};
  job.parameter_servers = 2;  // this shard owns the odd seqs
  ps.add_job(job);
  Outbox out;
  auto fragment = [](std::uint32_t seq, std::uint32_t tensor) {
    PacketSpec s;
    s.job = 2;
    s.seq = seq;
    s.tensor = tensor;
    s.ps_index = 1;
    s.level = proto::Level::parameter_server;
    s.rack_fan_in = 1;
    s.workers = 1;
    s.values = {1};
    return make_packet(s);
  };
  auto result_of = [&](std::uint32_t seq, std::uint32_t tensor) {
    out.clear();
    ps.on_packet(0, fragment(seq, tensor), out);
    EXPECT_EQ(out.packets().size(), 1u);
    return header_of(out.packets()[0].bytes);
  };
  EXPECT_EQ(result_of(1, 0).results_behind, 0);  // nothing before it
  EXPECT_EQ(result_of(5, 0).results_behind, 0b10);  // 3 is missing, 1 is in
  // 7: 5 and 1 were sent, 3 not; a later tensor of the same run counts, seq for seq.
  EXPECT_EQ(result_of(7, 1).results_behind, 0b101);
  // 3 completes late; 7's kept result, sent again for a query, says so now.
  EXPECT_EQ(result_of(3, 0).results_behind, 0b1);
  PacketSpec q;
  q.job = 2;
  q.kind = proto::Kind::query;
  q.seq = 7;
  q.tensor = 1;
  q.ps_index = 1;
  q.level = proto::Level::parameter_server;
  q.rack_fan_in = 1;
  q.values = {};
  out.clear();
  ps.on_packet(0, make_packet(q), out);
  ASSERT_EQ(out.packets().size(), 1u);
  EXPECT_EQ(header_of(out.packets()[0].bytes).results_behind, 0b111);
  // Another run's seqs say nothing of this one's: run 1's seq 9 sees none of run 0's results.
  EXPECT_EQ(result_of(9, 0).results_behind, 0b1111);
  EXPECT_EQ(result_of(11, std::uint32_t{1} << 16).results_behind, 0);
}

}  // namespace
}  // namespace atp::engines

namespace atp::engines {
namespace {

TEST_F(ParameterServerTest, ASumIncludingEverythingHeldReplacesIt) {
  send(single(0, 0, {5}));       // worker 0 of rack 0 collided and came alone
  send(rack_sum(0, {5 + 7}));    // then rack 0's whole sum, which includes it
  EXPECT_EQ(counters().superseded, 1u);
  EXPECT_EQ(counters().duplicates, 0u);
  send(rack_sum(1, {100}));
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 112);
}

TEST_F(ParameterServerTest, APartlyOverlappingSumIsStillDropped) {
  send(single(0, 0, {5}));
  send(single(1, 0, {1}));
  send(rack_sum(0, {12}));  // includes rack 0 only, not rack 1's worker 0: not a superset
  EXPECT_EQ(counters().duplicates, 1u);
  EXPECT_EQ(counters().superseded, 0u);
}

}  // namespace
}  // namespace atp::engines

namespace atp::engines {
namespace {

TEST(ParameterServerIsolation, DropsWrongTokensAndStrangers) {
  ParameterServer ps;
  ps.add_job({1, {1}, 4, 8, /*downstream=*/50, 0, 16, /*token=*/77});
  Outbox out;
  PacketSpec s;
  s.level = proto::Level::parameter_server;
  s.rack_fan_in = 1;
  s.values = {3};
  auto p = make_packet(s);  // token 0
  ps.on_packet(0, p, out, 50);
  proto::store_be32(p.data() + 40, 77);
  ps.on_packet(0, p, out, 51);  // right token, wrong sender
  EXPECT_EQ(ps.job_counters(1)->forged, 2u);
  EXPECT_TRUE(out.empty());
  ps.on_packet(0, p, out, 50);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(header_of(out.packets()[0].bytes).token, 77u);  // results carry it too
}

// A resend that leaves its seq short: the switches it crossed flushed what they held, so the
// PS asks exactly the workers it still lacks, each once (engines.md §3.6).
TEST_F(ParameterServerTest, AResendLeavingItsSeqShortAsksTheMissingWorkersOnce) {
  send(rack_sum(1, {5}));
  PacketSpec resend = single(0, 0, {1});
  resend.flags = flag::kResend;
  send(resend);
  auto asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  const auto h = header_of(asked[0]);
  EXPECT_TRUE(h.is_resend_request());
  EXPECT_EQ(h.rack, 0);
  EXPECT_EQ(h.workers_bitmap, 0b10u);  // rack 0's worker 1, the one contribution missing
  EXPECT_EQ(h.rack_fan_in, 2);
  EXPECT_EQ(h.value_count, 0);
  send(resend);  // the same resend again: worker 1 was asked already
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(counters().resend_requests, 1u);
  send(single(0, 1, {2}));  // its answer completes the sum
  auto results = sent();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(values_of(results[0])[0], 8);
}

// A rack the PS has nothing of may hold a partial sum in its switch: one worker of it, the
// seq's lead rank there, is asked, and its resend flushes that sum. A resend without a flag
// asks nothing: it is no sign that the switches gave up what they held.
TEST_F(ParameterServerTest, ARackWithNothingHereIsAskedThroughOneWorker) {
  send(single(0, 0, {1}));
  EXPECT_TRUE(sent().empty());
  PacketSpec resend = single(0, 1, {2});
  resend.flags = flag::kResend;
  resend.seq = 0;
  send(resend);
  auto asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  const auto h = header_of(asked[0]);
  EXPECT_EQ(h.rack, 1);
  EXPECT_EQ(h.rack_fan_in, 3);
  EXPECT_EQ(h.workers_bitmap, 1u << lead_rank(0, 2, 3));
}

}  // namespace
}  // namespace atp::engines
