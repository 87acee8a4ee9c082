// Each switch rule as "packets in, packets out". docs/engines.md lists the same rules. Every
// test runs through a RecordingSwitch; on teardown its trace is written, read back and replayed
// through a fresh pipeline, which must give the same packets out (and, with ATP_TRACE_DIR set,
// is kept there for the P4 conformance harness).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "conformance/switch_trace.h"
#include "engines/switch/switch_pipeline.h"
#include "packet_builder.h"

namespace atp::engines {
namespace {

using atp::testing::header_of;
using atp::testing::make_packet;
using atp::testing::PacketSpec;
using atp::testing::values_of;
using Action = Verdict::Action;
namespace flag = proto::flag;

constexpr Port kUp = 100, kPs0 = 200, kPs1 = 201;
const std::vector<Port> kWorkers = {1, 2, 3};
const std::vector<Port> kRacks = {11, 12};

// A switch under test: packets arrive on the port of the member their header names.
class SwitchTest : public ::testing::Test {
 protected:
  void make(SwitchConfig config) { sw.emplace(config); }
  void add(SwitchJob job) {
    if (job.multicast_group == 0) job.multicast_group = multicast_group_of_job(job.job);
    sw->add_job(job);
    installed[job.job] = job;
  }
  // Runs one packet through at the test's clock; returns the verdict, rewrites `p` in place.
  Verdict run(std::vector<std::uint8_t>& p, bool congested = false) {
    return sw->process(p, natural_port(p), now, congested);
  }
  Verdict run_from(std::vector<std::uint8_t>& p, Port from) { return sw->process(p, from, now); }
  std::vector<Port> group_of(const Verdict& v) {
    auto ports = sw->pipeline().multicast_ports(v.group);
    return {ports.begin(), ports.end()};
  }
  AggregatorView agg(std::uint32_t index = 5) { return sw->pipeline().registers().view(index); }
  const SwitchJobCounters& counters(std::uint32_t job = 1) { return *sw->pipeline().job_counters(job); }
  const SwitchCounters& switch_counters() { return sw->pipeline().counters(); }

  void TearDown() override {
    if (!sw) return;
    std::stringstream text;
    conformance::write_trace(text, sw->trace());
    const auto difference = conformance::replay(conformance::read_trace(text));
    EXPECT_FALSE(difference) << "replayed trace differs at packet " << difference->packet << ": "
                             << difference->what;
    if (const char* dir = std::getenv("ATP_TRACE_DIR")) {
      const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
      std::ofstream(std::string(dir) + "/" + test->test_suite_name() + "." + test->name() +
                    ".jsonl")
          << text.str();
    }
  }

  std::optional<conformance::RecordingSwitch> sw;
  std::map<std::uint32_t, SwitchJob> installed;
  Time now = 0;

 private:
  // Upward packets from the member their header names, downward ones from the first hop up.
  Port natural_port(const std::vector<std::uint8_t>& p) {
    proto::Header h;
    const auto it = installed.begin();
    if (it == installed.end()) return 0;
    const SwitchJob& job =
        proto::decode(p, h) == proto::DecodeError::ok && installed.count(h.job) ? installed[h.job]
                                                                                 : it->second;
    if (proto::decode(p, h) != proto::DecodeError::ok) return job.downstream.front();
    if (h.is_downward()) return job.upstream.front();
    const std::size_t member = sw->pipeline().config().level == proto::Level::rack
                                   ? (h.workers_bitmap ? std::countr_zero(h.workers_bitmap) : 0)
                                   : h.rack;
    return job.downstream[std::min(member, job.downstream.size() - 1)];
  }
};

class SwitchFanIn : public SwitchTest {};
class StaticPolicy : public SwitchTest {};
class NonePolicy : public SwitchTest {};
class SwitchConfigTest : public SwitchTest {};

class RackSwitch : public SwitchTest {
 protected:
  RackSwitch() {
    make({proto::Level::rack, 16, 8, Policy::atp});
    install_fan_in(2);
  }
  // Jobs 1 and 2, whose sums need `fan_in` workers (PacketSpec's default rack_fan_in is 2).
  void install_fan_in(std::uint8_t fan_in) {
    for (std::uint32_t id : {1u, 2u}) {
      SwitchJob job{id, kWorkers, {kUp}, 4};
      job.fan_in = fan_in;
      add(job);
    }
  }
  PacketSpec worker(std::uint8_t rank, std::vector<std::int32_t> values) {
    PacketSpec s;
    s.workers = 1u << rank;
    s.values = std::move(values);
    return s;
  }
  // Worker 0's fragment claims the aggregator; then a float request naming `workers` (none: to
  // every worker, as floats; some: a resend request) passes down, multicast.
  // Worker 0's fragment claims the aggregator; then a downward packet of that seq (a result
  // carries three values, a float request none) naming `workers`.
  PacketSpec downward_after_a_claim(std::uint8_t flags, std::uint32_t workers) {
    auto a = make_packet(worker(0, {1, 2, 3}));
    run(a);
    PacketSpec r;
    r.flags = flags;
    r.workers = workers;
    r.values.clear();
    if (flags == flag::kResult) r.values = {5, 5, 5};
    return r;
  }
  void float_request_after_a_claim(std::uint32_t workers) {
    auto p = make_packet(downward_after_a_claim(flag::kFloatRequest, workers));
    EXPECT_EQ(run(p).action, Action::multicast);
  }
};

TEST_F(RackSwitch, FirstFragmentClaimsAndIsAbsorbed) {
  auto p = make_packet(worker(0, {1, 2, 3}));
  EXPECT_EQ(run(p).action, Action::drop);
  EXPECT_TRUE(agg().valid());
  EXPECT_EQ(agg().bitmap, 1u);
  EXPECT_EQ(agg().count, 1);
  EXPECT_EQ(counters().aggregated, 1u);
}

TEST_F(RackSwitch, LastFragmentCompletesAndForwardsTheSumAsARackSum) {
  auto a = make_packet(worker(0, {1, 2, 3}));
  auto b = make_packet(worker(1, {10, -20, 30}));
  run(a);
  const Verdict f = run(b);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kUp);
  EXPECT_EQ(values_of(b), (std::vector<std::int32_t>{11, -18, 33}));
  const auto h = header_of(b);
  EXPECT_EQ(h.racks_bitmap, 1u);  // rack 0 complete
  EXPECT_EQ(h.workers_bitmap, 0u);
  EXPECT_EQ(h.next_level, proto::Level::parameter_server);  // one-rack job skips level 2
  EXPECT_EQ(agg().count, 2);
  EXPECT_EQ(counters().completed, 1u);
}

TEST_F(RackSwitch, TwoRackJobSendsCompletedSumToLevelTwo) {
  install_fan_in(1);  // the job's only worker in this rack
  PacketSpec s = worker(0, {4});
  s.job_fan_in = 2;
  s.rack = 1;
  s.rack_fan_in = 1;
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  const auto h = header_of(p);
  EXPECT_EQ(h.next_level, proto::Level::spine);
  EXPECT_EQ(h.racks_bitmap, 2u);
}

// A rack's complete sum goes up to a level-2 switch, which holds it until the seq's result:
// the rack's aggregator is freed as the sum leaves (in the packet's last pass: the owner stage
// comes before the count stage on a Tofino, so a one-pass packet takes a second). Held until
// the result, it made every later seq of the job planned on it collide while another rack
// recovered a loss (docs/engines.md §2.4).
TEST_F(RackSwitch, ACompleteSumFreesItsAggregatorWhenALevelTwoWillHoldIt) {
  for (std::uint8_t rank : {0, 1}) {
    PacketSpec s = worker(rank, {1, 2, 3});
    s.job_fan_in = 2;
    auto p = make_packet(s);
    const Verdict v = run(p);
    if (rank == 1) {
      ASSERT_EQ(v.action, Action::port);
      EXPECT_EQ(v.passes, 2);
      EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{2, 4, 6}));
    }
  }
  EXPECT_FALSE(agg().valid());
  PacketSpec next = worker(0, {7, 7, 7});
  next.job_fan_in = 2;
  next.seq = 16;  // the job's next seq on aggregator 5
  auto n = make_packet(next);
  EXPECT_EQ(run(n).action, Action::drop);  // claimed, not collided
  EXPECT_EQ(counters().collisions, 0u);
  // A worker's resend of the finished seq finds nothing of it here and goes up as it is.
  PacketSpec resend = worker(1, {1, 2, 3});
  resend.job_fan_in = 2;
  resend.flags = flag::kResend;
  auto r = make_packet(resend);
  ASSERT_EQ(run(r).action, Action::port);
  EXPECT_EQ(values_of(r), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(agg().values[0], 7);
}

// With the PS right above, the rack's sum is the seq's: its result comes straight back, and the
// aggregator keeps the sum until then, to send it again for a resend.
TEST_F(RackSwitch, ACompleteSumWithNoLevelTwoAboveKeepsItsAggregatorUntilTheResult) {
  for (std::uint8_t rank : {0, 1}) {
    auto p = make_packet(worker(rank, {1, 2, 3}));
    EXPECT_EQ(run(p).passes, 1);
  }
  EXPECT_TRUE(agg().valid());
}

TEST_F(RackSwitch, DuplicateOfPartialIsDropped) {
  auto a = make_packet(worker(0, {1, 2, 3}));
  auto again = a;
  run(a);
  EXPECT_EQ(run(again).action, Action::drop);
  EXPECT_EQ(agg().count, 1);
  EXPECT_EQ(counters().duplicates, 1u);
}

TEST_F(RackSwitch, DuplicateOfCompleteReforwardsTheSum) {
  auto a = make_packet(worker(0, {1, 2, 3}));
  auto b = make_packet(worker(1, {1, 1, 1}));
  auto b_again = b;
  run(a);
  run(b);
  ASSERT_EQ(run(b_again).action, Action::port);
  EXPECT_EQ(values_of(b_again), (std::vector<std::int32_t>{2, 3, 4}));
  EXPECT_EQ(header_of(b_again).racks_bitmap, 1u);
}

TEST_F(RackSwitch, OtherOwnerMeansCollisionAndUnaggregatedForward) {
  auto mine = make_packet(worker(0, {1, 2, 3}));
  run(mine);
  PacketSpec other = worker(0, {7, 8, 9});
  other.job = 2;  // same aggregator index, other job
  auto p = make_packet(other);
  ASSERT_EQ(run(p).action, Action::port);
  const auto h = header_of(p);
  EXPECT_TRUE(h.has(flag::kCollision));
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{7, 8, 9}));
  EXPECT_EQ(h.workers_bitmap, 1u);
  EXPECT_EQ(agg().owner.job(), 1u);  // untouched
  EXPECT_EQ(counters(2).collisions, 1u);
}

TEST_F(RackSwitch, SameJobOtherSeqInTheSameAggregatorCollides) {
  auto mine = make_packet(worker(0, {1}));
  run(mine);
  PacketSpec s = worker(1, {2});
  s.seq = 1;  // within the window: seq 0 may still be live
  auto p = make_packet(s);
  EXPECT_EQ(run(p).action, Action::port);
  EXPECT_TRUE(header_of(p).has(flag::kCollision));
}

// An aggregator left behind (here seq 0, whose other worker never comes) keeps colliding with
// the job's later seqs until its claim is stale_after old; then the next claim takes it over.
TEST_F(RackSwitch, AnOrphanIsTakenOverOnceItsClaimIsStale) {
  auto old = make_packet(worker(0, {1}));
  run(old);
  PacketSpec s = worker(0, {5});
  s.seq = 4;
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_TRUE(header_of(p).has(flag::kCollision));
  now += sw->pipeline().config().stale_after;
  auto q = make_packet(s);
  EXPECT_EQ(run(q).action, Action::drop);  // claimed: waits for worker 1
  EXPECT_EQ(agg().owner.lo, 4u);
  EXPECT_EQ(agg().bitmap, 0b01u);
  EXPECT_EQ(counters().expired, 1u);
}

// Half of stale_after is never enough: the clock ticks in halves of it.
TEST_F(RackSwitch, AClaimYoungerThanHalfOfStaleAfterIsNeverTakenOver) {
  auto old = make_packet(worker(0, {1}));
  run(old);
  now += sw->pipeline().config().stale_after / 2 - 1;
  PacketSpec s = worker(0, {5});
  s.job = 2;
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_TRUE(header_of(p).has(flag::kCollision));
  EXPECT_EQ(agg().owner.job(), 1u);
}

TEST_F(RackSwitch, AnotherRunOfTheJobCollidesUntilTheOldRunsClaimIsStale) {
  auto a = make_packet(worker(0, {1}));  // run 0, seq 0: claims, never completes (workers died)
  run(a);
  PacketSpec s = worker(1, {7});
  s.tensor = proto::wire_tensor(1, 0);  // run 1, seq 0 again: never added to run 0's sum
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_TRUE(header_of(p).has(flag::kCollision));
  EXPECT_EQ(agg().owner.run(), 0);
  EXPECT_EQ(agg().bitmap, 0b01u);
  now += sw->pipeline().config().stale_after;
  auto q = make_packet(s);
  EXPECT_EQ(run(q).action, Action::drop);  // taken over afresh
  EXPECT_EQ(agg().owner.run(), 1);
  EXPECT_EQ(agg().bitmap, 0b10u);
  EXPECT_EQ(counters().expired, 1u);
}

TEST_F(RackSwitch, ResendFlushesPartialPlusItsOwnValuesAndFrees) {
  install_fan_in(3);
  PacketSpec three = worker(0, {1, 2, 3});
  three.rack_fan_in = 3;
  auto a = make_packet(three);
  run(a);
  PacketSpec r = worker(1, {10, 10, 10});
  r.rack_fan_in = 3;
  r.flags = flag::kResend;
  auto p = make_packet(r);
  ASSERT_EQ(run(p).action, Action::port);
  const auto h = header_of(p);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{11, 12, 13}));
  EXPECT_EQ(h.workers_bitmap, 0b11u);
  EXPECT_EQ(h.racks_bitmap, 0u);
  EXPECT_TRUE(h.has(flag::kResend));
  EXPECT_FALSE(agg().valid());
  EXPECT_EQ(counters().flushes, 1u);
}

TEST_F(RackSwitch, ResendOfCountedWorkerFlushesOnlyThePartial) {
  install_fan_in(3);
  PacketSpec s = worker(0, {1, 2, 3});
  s.rack_fan_in = 3;
  auto a = make_packet(s);
  run(a);
  s.flags = flag::kResend;
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(header_of(p).workers_bitmap, 1u);
  EXPECT_FALSE(agg().valid());
}

TEST_F(RackSwitch, ResendThatCompletesTheRackIsARackSum) {
  auto a = make_packet(worker(0, {1}));
  run(a);
  PacketSpec r = worker(1, {2});
  r.flags = flag::kResend;
  auto p = make_packet(r);
  run(p);
  EXPECT_EQ(header_of(p).racks_bitmap, 1u);
  EXPECT_EQ(header_of(p).workers_bitmap, 0u);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{3}));
}

TEST_F(RackSwitch, ResendNeverClaims) {
  PacketSpec r = worker(0, {1, 2, 3});
  r.flags = flag::kResend;
  auto p = make_packet(r);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_FALSE(agg().valid());
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{1, 2, 3}));
}

TEST_F(RackSwitch, ResultFreesOwnedAggregatorAndFansOut) {
  auto p = make_packet(downward_after_a_claim(flag::kResult, 0));
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::multicast);
  EXPECT_EQ(group_of(f), kWorkers);
  EXPECT_FALSE(agg().valid());
  EXPECT_EQ(counters().results_sent, 1u);
}

// A late copy for one worker (protocol.md §4) frees what a result frees and goes down to that
// worker's port alone; naming a worker the switch has no port for, it is malformed.
TEST_F(RackSwitch, AResultNamingOneWorkerFreesTheAggregatorAndGoesToThatWorkerOnly) {
  PacketSpec r = downward_after_a_claim(flag::kResult, 1u << 2);
  r.rack_fan_in = 4;
  auto p = make_packet(r);
  const auto sent = p;
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kWorkers[2]);
  EXPECT_EQ(p, sent);  // untouched
  EXPECT_FALSE(agg().valid());
  EXPECT_EQ(counters().results_sent, 1u);
  r.workers = 1u << 3;  // no port for a fourth worker
  auto stray = make_packet(r);
  EXPECT_EQ(run(stray).action, Action::drop);
  EXPECT_EQ(switch_counters().malformed, 1u);
}

// A reduce-scatter shard (protocol.md §8.1): the owner its fragments name rides up on their
// sum untouched, and the PS's header-only result for the others (a done copy) frees the
// aggregator and fans out like any result.
TEST_F(RackSwitch, AShardsOwnerRidesUpOnItsSumAndItsDoneCopyFreesAndFansOut) {
  const std::uint32_t owner = proto::encode_result_owner({0, 1});
  PacketSpec first = worker(0, {1, 2, 3}), last = worker(1, {10, -20, 30});
  first.remap_index = last.remap_index = owner;
  auto a = make_packet(first), b = make_packet(last);
  run(a);
  ASSERT_EQ(run(b).action, Action::port);
  EXPECT_EQ(header_of(b).remap_index, owner);
  EXPECT_EQ(values_of(b), (std::vector<std::int32_t>{11, -18, 33}));
  PacketSpec done;
  done.flags = flag::kResult;
  done.workers = 0;
  done.values.clear();
  auto d = make_packet(done);
  const Verdict f = run(d);
  ASSERT_EQ(f.action, Action::multicast);
  EXPECT_EQ(group_of(f), kWorkers);
  EXPECT_FALSE(agg().valid());
}

// The run handshake passes untouched, even where its fields name a held aggregator.
TEST_F(RackSwitch, HandshakePassesWithoutTouchingAnyAggregator) {
  auto a = make_packet(worker(0, {1, 2, 3}));
  run(a);
  const AggregatorView before = agg();

  PacketSpec join = worker(1, {});
  join.kind = proto::Kind::join;
  auto p = make_packet(join);
  const Verdict up = run(p, /*congested=*/true);
  ASSERT_EQ(up.action, Action::port);
  EXPECT_EQ(up.port, kUp);
  EXPECT_EQ(header_of(p).next_level, proto::Level::parameter_server);
  EXPECT_EQ(header_of(p).flags, 0);  // no ECN mark either: it is not a fragment
  EXPECT_EQ(switch_counters().ecn_marked, 0u);

  PacketSpec joined = join;
  joined.kind = proto::Kind::joined;
  auto q = make_packet(joined);
  const Verdict down = run(q);
  ASSERT_EQ(down.action, Action::port);
  EXPECT_EQ(down.port, kWorkers[1]);  // the asker (bit 1) only
  joined.rack_fan_in = 4;
  joined.workers = 1u << 3;  // a worker this switch has no port for
  auto stray = make_packet(joined);
  EXPECT_EQ(run(stray).action, Action::drop);

  EXPECT_TRUE(agg().valid());
  EXPECT_EQ(agg().bitmap, before.bitmap);
  EXPECT_EQ(agg().count, before.count);
  EXPECT_EQ(counters().aggregated, 1u);
}

// A worker's result query (engines.md §3.6) is the PS's alone: it passes at its held
// aggregator's seq without flushing, joining or freeing it, and takes no ECN mark.
TEST_F(RackSwitch, AResultQueryPassesWithoutTouchingItsSeqsAggregator) {
  auto a = make_packet(worker(0, {1, 2, 3}));
  run(a);
  const AggregatorView before = agg();
  PacketSpec query = worker(1, {});
  query.kind = proto::Kind::query;
  query.level = proto::Level::parameter_server;
  auto p = make_packet(query);
  const auto sent = p;
  const Verdict up = run(p, /*congested=*/true);
  ASSERT_EQ(up.action, Action::port);
  EXPECT_EQ(up.port, kUp);
  EXPECT_EQ(p, sent);  // untouched
  EXPECT_EQ(switch_counters().ecn_marked, 0u);
  EXPECT_TRUE(agg().valid());
  EXPECT_EQ(agg().bitmap, before.bitmap);
  EXPECT_EQ(agg().count, before.count);
  EXPECT_EQ(counters().flushes, 0u);
  EXPECT_EQ(counters().forwarded_up, 1u);

  // One naming this level (workers send 0) is no fragment either: it joins nothing and takes
  // no flag (a collision flag on one made it undecodable; found by switch_pipeline_fuzzer).
  query.level = proto::Level::rack;
  auto named = make_packet(query);
  ASSERT_EQ(run(named).action, Action::port);
  EXPECT_EQ(header_of(named).flags, 0);
  EXPECT_EQ(agg().bitmap, before.bitmap);
  EXPECT_EQ(counters().aggregated, 1u);
}

TEST_F(RackSwitch, ResultOfAnotherSeqLeavesTheAggregator) {
  auto a = make_packet(worker(0, {1}));
  run(a);
  PacketSpec r;
  r.flags = flag::kResult;
  r.seq = 9;
  r.workers = 0;
  auto p = make_packet(r);
  EXPECT_EQ(run(p).action, Action::multicast);
  EXPECT_TRUE(agg().valid());
}

TEST_F(RackSwitch, FloatRequestFreesTheAggregatorLikeAResult) {
  float_request_after_a_claim(0);
  EXPECT_FALSE(agg().valid());
}

// A request naming workers passes down while the rack's other contributions may still be in
// the aggregator: it frees nothing, so the named worker's resend flushes them up with its own.
TEST_F(RackSwitch, AResendRequestLeavesTheAggregatorAlone) {
  float_request_after_a_claim(0b10);
  EXPECT_TRUE(agg().valid());
}

TEST_F(RackSwitch, FloatFragmentsPassUnaggregated) {
  PacketSpec s = worker(0, {0x3f800000});
  s.flags = flag::kFloatPayload;
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_FALSE(agg().valid());
  EXPECT_EQ(values_of(p)[0], 0x3f800000);
}

// ECN is an egress fact: what leaves through a congested port is marked; an absorbed packet
// leaves nothing to mark.
TEST_F(RackSwitch, CongestedEgressMarksWhatLeaves) {
  auto a = make_packet(worker(0, {1}));
  run(a, /*congested=*/true);
  EXPECT_FALSE(agg().ecn);
  EXPECT_EQ(switch_counters().ecn_marked, 0u);
  auto b = make_packet(worker(1, {1}));
  ASSERT_EQ(run(b, /*congested=*/true).action, Action::port);
  EXPECT_TRUE(header_of(b).has(flag::kEcn));
  EXPECT_EQ(switch_counters().ecn_marked, 1u);
  PacketSpec r;
  r.flags = flag::kResult;
  r.workers = 0;
  auto result = make_packet(r);
  ASSERT_EQ(run(result, /*congested=*/true).action, Action::multicast);
  EXPECT_TRUE(header_of(result).has(flag::kEcn));  // toward the workers: they slow down
}

TEST_F(RackSwitch, ArrivingEcnMarkIsSticky) {
  PacketSpec s = worker(0, {1});
  s.flags = flag::kEcn;
  auto a = make_packet(s);
  run(a);
  auto b = make_packet(worker(1, {1}));
  run(b);
  EXPECT_TRUE(header_of(b).has(flag::kEcn));
}

TEST_F(RackSwitch, Int32OverflowIsFlaggedNeverSilent) {
  auto a = make_packet(worker(0, {2147483647, -5}));
  auto b = make_packet(worker(1, {1, -5}));
  run(a);
  ASSERT_EQ(run(b).action, Action::port);
  EXPECT_TRUE(header_of(b).has(flag::kWrapped));
}

TEST_F(RackSwitch, MalformedAndUnknownJobAreDroppedAndCounted) {
  std::vector<std::uint8_t> junk(10, 0xFF);
  EXPECT_EQ(run(junk).action, Action::drop);
  PacketSpec s = worker(0, {1});
  s.job = 99;
  auto p = make_packet(s);
  EXPECT_EQ(run(p).action, Action::drop);
  EXPECT_EQ(switch_counters().malformed, 1u);
  EXPECT_EQ(switch_counters().unknown_job, 1u);
}

// A member speaks for itself alone (issue 49 item 1): a worker's port names only its own
// rank's bit, or one port could complete seqs, and ask for results, in the others' names.
TEST_F(RackSwitch, AWorkerPortNamingAnotherRankIsForgedAndTouchesNothing) {
  PacketSpec query = worker(1, {});
  query.kind = proto::Kind::query;
  query.level = proto::Level::parameter_server;
  PacketSpec join = query;
  join.kind = proto::Kind::join;
  PacketSpec resend = worker(0, {1, 2, 3});
  resend.workers = 0b11;
  resend.flags = flag::kResend;
  std::uint64_t forged = 0;
  for (const PacketSpec& spec : {worker(1, {1, 2, 3}), resend, query, join}) {
    auto p = make_packet(spec);
    EXPECT_EQ(run_from(p, kWorkers[0]).action, Action::drop);
    EXPECT_EQ(counters().forged, ++forged);
  }
  EXPECT_EQ(sw->pipeline().registers().in_use(), 0u);
  auto own = make_packet(worker(0, {1, 2, 3}));
  EXPECT_EQ(run_from(own, kWorkers[0]).action, Action::drop);  // absorbed
  EXPECT_EQ(sw->pipeline().registers().in_use(), 1u);
  EXPECT_EQ(counters().forged, forged);
}

TEST_F(RackSwitch, RemovingAJobFreesItsAggregators) {
  auto a = make_packet(worker(0, {1}));
  run(a);
  EXPECT_TRUE(sw->remove_job(1));
  EXPECT_FALSE(agg().valid());
}

TEST_F(RackSwitch, ValueCountMismatchIsTreatedAsCollision) {
  auto a = make_packet(worker(0, {1, 2}));
  run(a);
  auto b = make_packet(worker(1, {1, 2, 3}));
  ASSERT_EQ(run(b).action, Action::port);
  EXPECT_TRUE(header_of(b).has(flag::kCollision));
}

class SpineSwitch : public SwitchTest {
 protected:
  SpineSwitch() {
    make({proto::Level::spine, 16, 8, Policy::atp});
    SwitchJob job{1, kRacks, {kPs0, kPs1}, 4};
    job.fan_in = 2;
    add(job);
  }
  PacketSpec rack_sum(std::uint8_t rack, std::vector<std::int32_t> values) {
    PacketSpec s;
    s.level = proto::Level::spine;
    s.job_fan_in = 2;
    s.rack = rack;
    s.workers = 0;
    s.racks = 1u << rack;
    s.values = std::move(values);
    return s;
  }
};

TEST_F(SpineSwitch, HandshakeGoesToPsZeroAndItsAnswerToTheAskersRack) {
  PacketSpec join;
  join.kind = proto::Kind::join;
  join.level = proto::Level::spine;
  join.job_fan_in = 2;
  join.rack = 1;
  join.workers = 1;
  join.values.clear();
  auto up = make_packet(join);
  const Verdict f = run(up);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kPs0);
  PacketSpec answer = join;
  answer.kind = proto::Kind::joined;
  auto down = make_packet(answer);
  const Verdict g = run(down);
  ASSERT_EQ(g.action, Action::port);
  EXPECT_EQ(g.port, kRacks[1]);
}

TEST_F(SpineSwitch, AResultQueryGoesToThePsOfItsSeqsShard) {
  PacketSpec query;
  query.kind = proto::Kind::query;
  query.level = proto::Level::parameter_server;
  query.job_fan_in = 2;
  query.rack = 1;
  query.workers = 1;
  query.ps_index = 1;
  query.values.clear();
  auto p = make_packet(query);
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kPs1);
}

TEST_F(SpineSwitch, AddsRackSumsAndRoutesToThePsOfTheShard) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  PacketSpec b_spec = rack_sum(1, {3, 4});
  b_spec.ps_index = 1;
  auto b = make_packet(b_spec);
  EXPECT_EQ(run(a).action, Action::drop);
  const Verdict f = run(b);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kPs1);
  EXPECT_EQ(values_of(b), (std::vector<std::int32_t>{4, 6}));
  EXPECT_EQ(header_of(b).racks_bitmap, 0b11u);
  EXPECT_EQ(header_of(b).next_level, proto::Level::parameter_server);
}

TEST_F(SpineSwitch, PartialRackContributionsPassThrough) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec partial = rack_sum(1, {5, 5});
  partial.racks = 0;
  partial.workers = 1;
  partial.rack_fan_in = 3;
  partial.flags = flag::kCollision;
  auto p = make_packet(partial);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{5, 5}));
  EXPECT_EQ(agg(5).count, 1);
}

TEST_F(SpineSwitch, PartialResendMergesAsThePartOfItsRack) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec partial = rack_sum(1, {5, 5});
  partial.racks = 0;
  partial.workers = 0b10;
  partial.rack_fan_in = 3;
  partial.flags = flag::kResend;
  auto p = make_packet(partial);
  ASSERT_EQ(run(p).action, Action::port);
  const auto h = header_of(p);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{6, 7}));
  EXPECT_EQ(h.racks_bitmap, 0b01u);   // rack 0 whole ...
  EXPECT_EQ(h.workers_bitmap, 0b10u); // ... plus worker 1 of rack 1
  EXPECT_EQ(h.rack, 1);
  EXPECT_FALSE(agg(5).valid());
}

TEST_F(SpineSwitch, PartialResendOfAWholeRackAddsNothing) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec partial = rack_sum(0, {5, 5});
  partial.racks = 0;
  partial.workers = 0b1;
  partial.flags = flag::kResend;
  auto p = make_packet(partial);
  run(p);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(header_of(p).racks_bitmap, 0b01u);
  EXPECT_EQ(header_of(p).workers_bitmap, 0u);
}

TEST_F(SpineSwitch, ResultFansOutToTheJobsRacks) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec r = rack_sum(0, {9, 9});
  r.flags = flag::kResult;
  r.racks = 0;
  auto p = make_packet(r);
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::multicast);
  EXPECT_EQ(group_of(f), kRacks);
  EXPECT_FALSE(agg(5).valid());
}

TEST_F(SpineSwitch, AResultNamingOneWorkerGoesToItsRackOnly) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec r = rack_sum(1, {9, 9});
  r.flags = flag::kResult;
  r.racks = 0;
  r.rack_fan_in = 4;
  r.workers = 1u << 3;
  auto p = make_packet(r);
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::port);
  EXPECT_EQ(f.port, kRacks[1]);
  EXPECT_FALSE(agg(5).valid());
}

// A done copy (a reduce-scatter shard's header-only result) frees and fans out to every rack.
TEST_F(SpineSwitch, ADoneCopyFreesTheAggregatorAndFansOutToTheJobsRacks) {
  PacketSpec first = rack_sum(0, {1, 2});
  first.remap_index = proto::encode_result_owner({1, 3});
  auto a = make_packet(first);
  run(a);
  EXPECT_TRUE(agg(5).valid());
  PacketSpec done = rack_sum(0, {});
  done.flags = flag::kResult;
  done.racks = 0;
  auto p = make_packet(done);
  const Verdict f = run(p);
  ASSERT_EQ(f.action, Action::multicast);
  EXPECT_EQ(group_of(f), kRacks);
  EXPECT_FALSE(agg(5).valid());
}

// A rack switch's port names no rack but its own: neither its rack's sum, nor part of it,
// nor two racks' sums at once may come from another rack's port.
TEST_F(SpineSwitch, ARackPortNamingAnotherRackIsForgedAndTouchesNothing) {
  PacketSpec part = rack_sum(1, {5, 5});  // part of rack 1
  part.racks = 0;
  part.workers = 0b11;
  part.rack_fan_in = 3;
  PacketSpec two = rack_sum(0, {5, 5});
  two.racks = 0b11;
  std::uint64_t forged = 0;
  for (const PacketSpec& spec : {rack_sum(1, {5, 5}), part, two}) {
    auto p = make_packet(spec);
    EXPECT_EQ(run_from(p, kRacks[0]).action, Action::drop);
    EXPECT_EQ(counters().forged, ++forged);
  }
  EXPECT_EQ(sw->pipeline().registers().in_use(), 0u);
  auto whole = make_packet(rack_sum(1, {5, 5}));
  EXPECT_EQ(run_from(whole, kRacks[1]).action, Action::drop);  // absorbed
  auto own_part = make_packet(part);
  EXPECT_EQ(run_from(own_part, kRacks[1]).action, Action::port);  // passes up
  EXPECT_EQ(sw->pipeline().registers().in_use(), 1u);
  EXPECT_EQ(counters().forged, forged);
}

TEST_F(SpineSwitch, ShardIndexBeyondTheJobsServersIsDropped) {
  PacketSpec s = rack_sum(0, {1});
  s.ps_index = 7;
  s.flags = flag::kFloatPayload;
  auto p = make_packet(s);
  EXPECT_EQ(run(p).action, Action::drop);
  EXPECT_EQ(switch_counters().malformed, 1u);
}

TEST_F(SpineSwitch, UnroutableResendLeavesTheAggregatorAlone) {
  auto a = make_packet(rack_sum(0, {1, 2}));
  run(a);
  PacketSpec r = rack_sum(1, {3, 4});
  r.flags = flag::kResend;
  r.ps_index = 7;
  auto p = make_packet(r);
  EXPECT_EQ(run(p).action, Action::drop);
  EXPECT_TRUE(agg(5).valid());  // not flushed into a packet that goes nowhere
}

TEST_F(SwitchFanIn, HeaderDisagreeingWithTheInstalledFanInIsNotAggregated) {
  make({proto::Level::rack, 16, 8, Policy::atp});
  SwitchJob job{1, kWorkers, {kUp}, 4};
  job.fan_in = 3;
  add(job);
  PacketSpec s;  // claims rack_fan_in 2: it would complete a 3-worker rack early
  auto p = make_packet(s);
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_FALSE(agg(5).valid());
  EXPECT_EQ(counters().fan_in_mismatch, 1u);
  s.rack_fan_in = 3;
  auto ok = make_packet(s);
  EXPECT_EQ(run(ok).action, Action::drop);  // absorbed: 1 of 3
}

// Found by the switch-pipeline fuzzer when a job could be installed without a fan-in: a spine
// aggregator claimed by a header of fan-in 3 (racks 0b100) was joined by one of fan-in 1, and
// the "complete" sum left with a bitmap beyond its fan-in. Now neither header can mix.
TEST_F(SwitchFanIn, HeadersOfOtherFanInsNeverShareAnAggregator) {
  make({proto::Level::spine, 16, 8, Policy::atp});
  SwitchJob job{1, kRacks, {kPs0}, 4};
  job.fan_in = 1;
  add(job);
  PacketSpec wide;
  wide.level = proto::Level::spine;
  wide.job_fan_in = 3;
  wide.rack = 1;  // from rack 1's port: a member names its own rack alone
  wide.rack_fan_in = 1;
  wide.workers = 0;
  wide.racks = 0b10;
  auto a = make_packet(wide);
  ASSERT_EQ(run(a).action, Action::port);  // forwarded, not aggregated
  EXPECT_EQ(sw->pipeline().registers().in_use(), 0u);
  PacketSpec narrow = wide;
  narrow.job_fan_in = 1;
  narrow.rack = 0;
  narrow.racks = 0b1;
  auto b = make_packet(narrow);
  ASSERT_EQ(run(b).action, Action::port);  // complete on its own
  EXPECT_EQ(header_of(b).racks_bitmap, 0b1u);  // header_of throws on a malformed packet
  EXPECT_EQ(counters().fan_in_mismatch, 1u);
}

TEST_F(StaticPolicy, UsesOnlyTheJobsSlice) {
  make({proto::Level::rack, 16, 8, Policy::static_partition});
  add({1, kWorkers, {kUp}, 4, /*first=*/8, /*count=*/2, /*fan_in=*/2});
  PacketSpec s;
  s.seq = 5;  // slots map in order: 8 + 5 % 2 = 9
  auto p = make_packet(s);
  run(p);
  EXPECT_TRUE(agg(9).valid());
  EXPECT_FALSE(agg(5).valid());
}

TEST_F(StaticPolicy, NoSliceMeansStraightToThePs) {
  make({proto::Level::rack, 16, 8, Policy::static_partition});
  add({1, kWorkers, {kUp}, 4, 0, 0});
  auto p = make_packet(PacketSpec{});
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_TRUE(header_of(p).has(flag::kCollision));
  EXPECT_EQ(sw->pipeline().registers().in_use(), 0u);
}

TEST_F(NonePolicy, ForwardsEverythingUntouched) {
  make({proto::Level::rack, 0, 8, Policy::none});
  add({1, kWorkers, {kUp}, 4});
  auto p = make_packet(PacketSpec{});
  ASSERT_EQ(run(p).action, Action::port);
  EXPECT_EQ(values_of(p), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_FALSE(header_of(p).has(flag::kCollision));
}

TEST_F(SwitchConfigTest, RejectsBadJobs) {
  make({proto::Level::rack, 16, 8, Policy::atp});
  EXPECT_THROW(add({1, kWorkers, {kUp}, 3}), std::invalid_argument);  // window
  EXPECT_THROW(add({1, kWorkers, {kUp}, 4, 0, 0, /*fan_in=*/0}), std::invalid_argument);
  EXPECT_THROW(add({1, kWorkers, {kUp}, 4, 0, 0, /*fan_in=*/33}), std::invalid_argument);
  EXPECT_THROW(add({1, kWorkers, {}, 4}), std::invalid_argument);     // no upstream
  EXPECT_THROW(add({1, kWorkers, {kUp}, 4, 10, 10}), std::invalid_argument);
  EXPECT_THROW(SwitchPipeline({proto::Level::parameter_server, 16, 8, Policy::atp}),
               std::invalid_argument);
}

TEST_F(SwitchTest, OwnerTagsNeedSixteenBitJobIdsAndOwnGroups) {
  make({proto::Level::rack, 16, 8, Policy::atp});
  EXPECT_THROW(add({kMaxSwitchJobId + 1, kWorkers, {kUp}, 4}), std::invalid_argument);
  add({kMaxSwitchJobId, kWorkers, {kUp}, 4, 0, 0, 1, 0, /*multicast_group=*/7});
  EXPECT_THROW(add({3, kWorkers, {kUp}, 4, 0, 0, 1, 0, /*multicast_group=*/7}),
               std::invalid_argument);  // group 7 reaches another job's members
  EXPECT_EQ(OwnerTag::of(kMaxSwitchJobId, 0xABCD, 9, 0x55).job(), kMaxSwitchJobId);
  EXPECT_EQ(OwnerTag::of(kMaxSwitchJobId, 0xABCD, 9, 0x55).run(), 0xABCD);
  EXPECT_EQ(OwnerTag::of(kMaxSwitchJobId, 0xABCD, 9, 0x55).lo, 9u ^ 0x55u);  // the keyed seq
  EXPECT_EQ(sizeof(OwnerTag), 8u);  // one 2 x 32-bit register pair
}

// A claim older than stale_after is restarted by the next fragment that joins it.
TEST_F(RackSwitch, AJoinOfAnExpiredClaimRestartsIt) {
  auto a = make_packet(worker(0, {1}));
  run(a);
  now += sw->pipeline().config().stale_after;
  auto b = make_packet(worker(1, {2}));
  EXPECT_EQ(run(b).action, Action::drop);  // restarted: holds worker 1 only
  EXPECT_EQ(agg().bitmap, 0b10u);
  EXPECT_EQ(counters().expired, 1u);
  auto c = make_packet(worker(0, {4}));
  ASSERT_EQ(run(c).action, Action::port);
  EXPECT_EQ(values_of(c), (std::vector<std::int32_t>{6}));
}

// The audit's wrong sum: a delayed duplicate of worker 0's seq 0 claims a free aggregator whose
// slot was remapped away, so nothing of the job visits it; 2^32 fragments later (the header's
// seq and tensor repeat) the same identity arrives from all three workers. Without a claim
// clock worker 0's new fragment was taken for a duplicate and the sum came out 10 + 100 + 100.
TEST_F(RackSwitch, AnIdentityRepeatedAfterTwoToTheThirtyTwoFragmentsNeverJoinsAnOrphan) {
  install_fan_in(3);
  PacketSpec s = worker(0, {10});
  s.rack_fan_in = 3;
  auto orphan = make_packet(s);
  now = 1 * kMillisecond;
  EXPECT_EQ(run(orphan).action, Action::drop);
  now += 400 * kSecond;  // 2^32 fragments of 1 KiB at 100 Gb/s
  std::vector<std::uint8_t> last;
  for (std::uint8_t rank = 0; rank < 3; ++rank) {
    PacketSpec again = worker(rank, {100});
    again.rack_fan_in = 3;
    last = make_packet(again);
    run(last);
  }
  EXPECT_EQ(values_of(last), (std::vector<std::int32_t>{300}));
  EXPECT_EQ(header_of(last).racks_bitmap, 1u);
}

// K per pass x passes: each pass adds its own lanes into its own register array.
TEST_F(SwitchTest, ValuesSpreadOverPassesAndLongerPacketsPassUp) {
  make({proto::Level::rack, 16, 2, Policy::atp, /*passes=*/3});
  add({1, kWorkers, {kUp}, 4, 0, 0, /*fan_in=*/2});
  PacketSpec s;
  s.values = {1, 2, 3, 4, 5};
  auto a = make_packet(s);
  run(a);
  s.workers = 0b10;
  s.values = {10, 20, 30, 40, 50};
  auto b = make_packet(s);
  ASSERT_EQ(run(b).action, Action::port);
  EXPECT_EQ(values_of(b), (std::vector<std::int32_t>{11, 22, 33, 44, 55}));
  EXPECT_EQ(agg().values, (std::vector<std::int32_t>{11, 22, 33, 44, 55, 0}));
  s.seq = 1;
  s.aggregator = 6;
  s.values = {1, 2, 3, 4, 5, 6, 7};  // beyond 2 x 3: the PS adds it
  auto c = make_packet(s);
  ASSERT_EQ(run(c).action, Action::port);
  EXPECT_FALSE(agg(6).valid());
}

// A P4 switch adds 10 values in the pass that decides and 21 in each pass after it
// (recirculation, p4/common/constants.p4): the verdict says how many passes a packet takes
// there, and the traces hold the BMv2 program to it, packet by packet.
// A rack switch of K = 64 whose job 1 sums three workers.
class SwitchPasses : public SwitchTest {
 protected:
  SwitchPasses() {
    make({proto::Level::rack, 16, 64, Policy::atp});
    SwitchJob job{1, kWorkers, {kUp}, 4};
    job.fan_in = 3;
    add(job);
  }
};

TEST_F(SwitchPasses, APacketWithMoreValuesThanAPassHoldsGoesRoundOnAP4Switch) {
  const std::vector<std::pair<std::size_t, std::uint8_t>> counts_and_passes = {
      {1, 1}, {10, 1}, {11, 2}, {31, 2}, {32, 3}, {52, 3}, {53, 4}, {64, 4}};
  std::uint32_t seq = 0;
  for (const auto& [count, passes] : counts_and_passes) {
    PacketSpec s;
    s.rack_fan_in = 3;
    s.seq = s.aggregator = seq++;
    s.values.assign(count, 1);
    auto p = make_packet(s);
    const Verdict v = run(p);
    EXPECT_EQ(v.action, Action::drop) << count;  // absorbed: its values wait for two more
    EXPECT_EQ(v.passes, passes) << count;
  }
  // A packet the value stages do not touch takes one pass, whatever it carries.
  PacketSpec other;
  other.rack_fan_in = 3;
  other.job = 2;
  other.values.assign(64, 1);
  auto unknown = make_packet(other);
  EXPECT_EQ(run(unknown).passes, 1);
}

// A rack's complete sum below a level 2 is released in its last pass, whatever its passes: a
// second for a sum of 10 values, the second and third of sums of 31 and 32 (the bounds of the
// v1model's "last pass" test). Each aggregator is free after, and the job's next seq on it claims.
TEST_F(SwitchPasses, ACompleteRackSumIsReleasedInItsLastPass) {
  const std::vector<std::pair<std::size_t, std::uint8_t>> counts_and_passes = {
      {10, 2}, {31, 2}, {32, 3}};
  std::uint32_t seq = 0;
  for (const auto& [count, passes] : counts_and_passes) {
    PacketSpec s;
    s.rack_fan_in = 3;
    s.job_fan_in = 2;
    s.seq = s.aggregator = seq++;
    s.values.assign(count, 1);
    for (std::uint8_t rank : {0, 1, 2}) {
      s.workers = 1u << rank;
      auto p = make_packet(s);
      const Verdict v = run(p);
      if (rank == 2) {
        EXPECT_EQ(v.action, Action::port) << count;
        EXPECT_EQ(v.passes, passes) << count;
        EXPECT_EQ(values_of(p), std::vector<std::int32_t>(count, 3)) << count;
      }
    }
    EXPECT_FALSE(agg(s.aggregator).valid()) << count;
    s.seq += 16;
    s.workers = 1;
    auto next = make_packet(s);
    EXPECT_EQ(run(next).action, Action::drop) << count;  // claimed
    EXPECT_TRUE(agg(s.aggregator).valid()) << count;
  }
  EXPECT_EQ(counters().collisions, 0u);
}

// A sum that wraps in a value a later pass adds (here the second and the fourth) is flagged as
// one in the first is: kept in the aggregator for a fragment still absorbed, in the header of
// the sum that leaves.
TEST_F(SwitchPasses, ASumThatWrapsInALaterPassIsFlaggedToo) {
  PacketSpec s;
  s.rack_fan_in = 3;
  s.values.assign(64, 1);
  s.values[60] = 2147483647;  // value 60: the fourth pass
  auto a = make_packet(s);
  run(a);
  s.workers = 0b10;
  s.values[60] = 1;           // wraps here, while the sum still waits for worker 2
  auto b = make_packet(s);
  EXPECT_EQ(run(b).action, Action::drop);
  s.workers = 0b100;
  s.values[60] = 0;
  auto c = make_packet(s);
  const Verdict v = run(c);
  ASSERT_EQ(v.action, Action::port);
  EXPECT_EQ(v.passes, 4);
  EXPECT_TRUE(header_of(c).has(flag::kWrapped));
  EXPECT_EQ(values_of(c)[59], 3);

  PacketSpec t = s;  // in a value of the second pass, added by the fragment that completes
  t.seq = t.aggregator = 9;
  t.workers = 0b1;
  t.values.assign(64, 0);
  t.values[20] = 2147483647;
  auto d = make_packet(t);
  run(d);
  t.workers = 0b10;
  t.values[20] = 0;
  auto e = make_packet(t);
  run(e);
  t.workers = 0b100;
  t.values[20] = 1;
  auto f = make_packet(t);
  ASSERT_EQ(run(f).action, Action::port);
  EXPECT_TRUE(header_of(f).has(flag::kWrapped));
}

TEST(SwitchTrace, ReplayFindsTheFirstDifferingField) {
  conformance::RecordingSwitch sw({proto::Level::rack, 16, 8, Policy::atp});
  sw.add_job({1, kWorkers, {kUp}, 4, 0, 0, /*fan_in=*/2, 0, multicast_group_of_job(1)});
  for (std::uint8_t rank = 0; rank < 2; ++rank) {
    PacketSpec s;
    s.workers = 1u << rank;
    auto p = make_packet(s);
    sw.process(p, kWorkers[rank], 0, /*congested=*/rank == 1);
  }
  std::stringstream text;
  conformance::write_trace(text, sw.trace());
  conformance::Trace trace = conformance::read_trace(text);
  ASSERT_EQ(trace.events.size(), 3u);
  EXPECT_FALSE(conformance::replay(trace));

  auto& sum = std::get<conformance::PacketRecord>(trace.events[2]);
  sum.out[proto::kHeaderBytes + 3] ^= 1;  // value 0 of the sum
  auto difference = conformance::replay(trace);
  ASSERT_TRUE(difference);
  EXPECT_EQ(difference->packet, 1u);
  EXPECT_EQ(difference->what, "value 0: expected 3, got 2");
  sum.out[proto::kHeaderBytes + 3] ^= 1;
  sum.out[1] &= ~flag::kEcn;
  difference = conformance::replay(trace);
  ASSERT_TRUE(difference);
  EXPECT_EQ(difference->what, "header flags: expected 0x0, got 0x8");
  sum.verdict.port = kPs0;
  EXPECT_EQ(conformance::replay(trace)->what, "verdict: expected port 200, got port 100");

  std::stringstream bad("{\"setup\": {\"level\": 1}}\n");
  EXPECT_THROW(conformance::read_trace(bad), std::invalid_argument);
}

}  // namespace
}  // namespace atp::engines

namespace atp::engines {
namespace {

// Tenant isolation: job 1's packets must carry its token and come from its own members.
class IsolatedSwitch : public SwitchTest {
 protected:
  IsolatedSwitch() {
    make({proto::Level::rack, 16, 8, Policy::atp});
    SwitchJob job{1, kWorkers, {kUp}, 4};
    job.token = 0xC0FFEE;
    job.fan_in = 2;
    add(job);
  }
  PacketSpec fragment(std::uint8_t rank, std::uint32_t token = 0xC0FFEE) {
    PacketSpec s;
    s.workers = 1u << rank;
    s.values = {1};
    s.token = token;
    packet = make_packet(s);
    return s;
  }
  Verdict send(Port from) { return run_from(packet, from); }

  std::vector<std::uint8_t> packet;
};

TEST_F(IsolatedSwitch, WrongTokenIsDroppedBeforeTouchingAnything) {
  fragment(0, 0xBAD);
  EXPECT_EQ(send(kWorkers[0]).action, Action::drop);
  EXPECT_FALSE(agg(5).valid());
  EXPECT_EQ(counters().forged, 1u);
}

// Issue 31 item 11: a tenant holding job 2's token sends a resend and a result naming job 1's
// seq and aggregator index. The seq stage frees before the identity stage looks, so only the
// key (the seq xor'd with the job's secret token, OwnerTag) keeps job 1's partial sum: it must
// still be there for job 1's next worker to complete.
TEST_F(IsolatedSwitch, AnotherJobsResendOrResultNamingThisJobsSeqAndIndexLeavesItsSumAlone) {
  SwitchJob other{2, {7, 8}, {kUp}, 4};
  other.token = 0xBEEF;
  other.fan_in = 2;
  add(other);
  fragment(0);
  ASSERT_EQ(send(kWorkers[0]).action, Action::drop);  // job 1 claims index 5 for seq 0
  ASSERT_TRUE(agg(5).valid());

  PacketSpec attack;
  attack.job = 2;
  attack.token = 0xBEEF;
  attack.flags = flag::kResend;
  attack.values = {1000};
  auto resend = make_packet(attack);
  EXPECT_EQ(run_from(resend, 7).action, Action::port);  // passes up to job 2's PS
  attack.flags = flag::kResult;
  attack.workers = 0;
  auto result = make_packet(attack);
  EXPECT_EQ(run_from(result, kUp).action, Action::multicast);  // to job 2's members
  EXPECT_EQ(counters().flushes, 0u);
  ASSERT_TRUE(agg(5).valid());
  EXPECT_EQ(agg(5).bitmap, 0b01u);

  fragment(1);
  ASSERT_EQ(send(kWorkers[1]).action, Action::port);  // job 1's sum, complete
  EXPECT_EQ(values_of(packet), (std::vector<std::int32_t>{2}));
}

TEST_F(IsolatedSwitch, FragmentsOnlyFromTheJobsWorkersResultsOnlyFromUpstream) {
  fragment(0);
  EXPECT_EQ(send(/*a stranger*/ 0xFFFF).action, Action::drop);
  EXPECT_EQ(send(kUp).action, Action::drop);  // upstream may not send fragments
  EXPECT_FALSE(agg(5).valid());
  EXPECT_EQ(send(kWorkers[0]).action, Action::drop);  // absorbed: a genuine claim
  EXPECT_TRUE(agg(5).valid());

  PacketSpec r;
  r.flags = flag::kResult;
  r.workers = 0;
  r.token = 0xC0FFEE;
  auto result = make_packet(r);
  auto forged_result = result;
  EXPECT_EQ(run_from(forged_result, kWorkers[1]).action, Action::drop);  // a worker posing as PS
  EXPECT_TRUE(agg(5).valid());  // not freed by the forgery
  EXPECT_EQ(counters().forged, 3u);
  EXPECT_EQ(run_from(result, kUp).action, Action::multicast);
  EXPECT_FALSE(agg(5).valid());
}

}  // namespace
}  // namespace atp::engines
