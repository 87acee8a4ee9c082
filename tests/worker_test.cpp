#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "engines/worker/worker.h"
#include "packet_builder.h"
#include "proto/aggregator_index.h"
#include "quant/quantizer.h"

namespace atp::engines {
namespace {

using atp::testing::header_of;
using atp::testing::make_packet;
using atp::testing::PacketSpec;
using atp::testing::values_of;
namespace flag = proto::flag;

constexpr NodeId kSwitch = 7;

WorkerConfig small_config() {
  WorkerConfig c;
  c.job = 3;
  c.rack = 1;
  c.rank_in_rack = 2;
  c.rack_fan_in = 4;
  c.job_fan_in = 2;
  c.job_workers = 8;
  c.values_per_packet = 4;
  c.window = 8;
  c.ring = 8;  // the tests below of a longer ring say so
  c.initial_window = 4;
  c.scale = 256;
  c.uplink = kSwitch;
  c.initial_rto = 10 * kMillisecond;
  c.min_rto = 1 * kMillisecond;
  c.max_rto = 80 * kMillisecond;
  c.deadline = 1 * kSecond;
  return c;
}

// The same job, seen from the worker that leads `seq`'s recovery (recovery_lead.h): it
// resends a gap at once, where the others wait for it.
WorkerConfig leading(WorkerConfig c, std::uint32_t seq) {
  c.rack = static_cast<std::uint8_t>(lead_rack(seq, c.job_fan_in));
  c.rank_in_rack = static_cast<std::uint8_t>(lead_rank(seq, c.job_fan_in, c.rack_fan_in));
  return c;
}

// A downward packet from the PS for `fragment`'s seq: its job, tensor, seq and aggregator.
PacketSpec downward_for(const proto::Header& h) {
  PacketSpec r;
  r.job = h.job;
  r.tensor = h.tensor;
  r.seq = h.seq;
  r.aggregator = h.aggregator;
  r.workers = 0;
  return r;
}
// The PS's answer for a fragment: `sum` ints per value (already the job's total).
std::vector<std::uint8_t> result_for(const std::vector<std::uint8_t>& fragment, std::int32_t sum,
                                     std::uint8_t extra_flags = 0) {
  const auto h = header_of(fragment);
  PacketSpec r = downward_for(h);
  r.flags = flag::kResult | extra_flags;
  r.values.assign(h.value_count, sum);
  return make_packet(r);
}

class WorkerTest : public ::testing::Test {
 protected:
  WorkerTest() : w(small_config()) {}

  std::vector<std::vector<std::uint8_t>> sent() {
    std::vector<std::vector<std::uint8_t>> v;
    for (auto& d : out.packets()) {
      EXPECT_EQ(d.to, kSwitch);
      v.push_back(d.bytes);
    }
    out.clear();
    return v;
  }

  // A worker of window 8 submits a tensor of 9 fragments: the first 8 leave, returned here.
  std::vector<std::vector<std::uint8_t>> send_eight_of_nine(Worker& wide) {
    wide.submit(0, nine_in, nine_out, out);
    auto frags = sent();
    EXPECT_EQ(frags.size(), 8u);
    return frags;
  }
  // The result for `fragment` carrying a plan (remap_index) for its lane's next seq.
  std::vector<std::uint8_t> planning_result(const std::vector<std::uint8_t>& fragment,
                                            std::uint32_t remap_index) {
    auto r = result_for(fragment, 8, flag::kRemap);
    proto::store_be32(r.data() + proto::offset::remap_index, remap_index);
    return r;
  }

  Worker w;
  Outbox out;
  std::vector<float> nine_in = std::vector<float>(4 * 9, 1.0f);
  std::vector<float> nine_out = std::vector<float>(4 * 9);
  std::vector<float> input = std::vector<float>(10, 0.5f);
  std::vector<float> output = std::vector<float>(10, -1.0f);
};

TEST_F(WorkerTest, SendsUpToTheCongestionWindowWithItsIdentity) {
  w.submit(0, input, output, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 3u);  // 10 values / K=4 -> 3 fragments, window allows 4
  for (std::uint32_t i = 0; i < 3; ++i) {
    const auto h = header_of(frags[i]);
    EXPECT_EQ(h.job, 3u);
    EXPECT_EQ(h.seq, i);
    EXPECT_EQ(h.workers_bitmap, 1u << 2);
    EXPECT_EQ(h.racks_bitmap, 0u);
    EXPECT_EQ(h.rack, 1);
    EXPECT_EQ(h.rack_fan_in, 4);
    EXPECT_EQ(h.job_fan_in, 2);
    EXPECT_EQ(h.next_level, proto::Level::rack);
    EXPECT_EQ(h.aggregator, proto::aggregator_hash(3, i));
    EXPECT_EQ(h.value_count, i < 2 ? 4 : 2);
    EXPECT_FALSE(h.has(flag::kResend));
  }
  EXPECT_EQ(values_of(frags[0]), (std::vector<std::int32_t>{128, 128, 128, 128}));
}

TEST_F(WorkerTest, WritesDequantizedResultsAndCompletes) {
  const auto id = w.submit(0, input, output, out);
  auto frags = sent();
  for (auto& f : frags) {
    auto r = result_for(f, 8 * 128);
    w.on_packet(1000, r, out);
  }
  EXPECT_EQ(w.status(id), AllreduceStatus::done);
  EXPECT_EQ(w.take_completed(), std::vector<std::uint32_t>{id});
  for (float v : output) EXPECT_EQ(v, 4.0f);
  EXPECT_TRUE(w.idle());
  EXPECT_FALSE(w.next_timer().has_value());
}

// A reduce-scatter's shards (Worker::submit with an owner): each fragment names its shard's
// owner, a header-only result completes a fragment of another worker's shard and leaves the
// output alone, and the owner waits for its values, whatever done copies come first.
TEST_F(WorkerTest, AShardOfAnotherWorkerCompletesOnDoneCopiesAndItsOwnOnItsValues) {
  const proto::ResultOwner other{0, 1}, self{1, 2};
  std::vector<float> theirs_in(8, 0.5f), mine_in(4, 0.5f), mine_out(4, -1.0f);
  const auto theirs = w.submit(0, quant::Precision::float32, theirs_in.data(), nullptr,
                               theirs_in.size(), out, other);
  const auto mine = w.submit(0, quant::Precision::float32, mine_in.data(), mine_out.data(),
                             mine_in.size(), out, self);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 3u);
  EXPECT_EQ(header_of(frags[0]).remap_index, proto::encode_result_owner(other));
  EXPECT_EQ(header_of(frags[1]).remap_index, proto::encode_result_owner(other));
  EXPECT_EQ(header_of(frags[2]).remap_index, proto::encode_result_owner(self));
  auto done_copy = [&](const std::vector<std::uint8_t>& fragment) {
    PacketSpec r = downward_for(header_of(fragment));
    r.flags = flag::kResult;
    r.values.clear();
    return make_packet(r);
  };
  w.on_packet(1000, done_copy(frags[0]), out);
  w.on_packet(1000, done_copy(frags[1]), out);
  EXPECT_EQ(w.status(theirs), AllreduceStatus::done);
  w.on_packet(1000, done_copy(frags[2]), out);  // its own shard: the values are still due
  EXPECT_EQ(w.status(mine), AllreduceStatus::pending);
  EXPECT_EQ(w.stats().done_copies, 2u);
  w.on_packet(1100, result_for(frags[2], 8 * 128), out);
  EXPECT_EQ(w.status(mine), AllreduceStatus::done);
  for (float v : mine_out) EXPECT_EQ(v, 4.0f);
  EXPECT_EQ(w.stats().malformed, 0u);
  EXPECT_THROW(w.submit(0, quant::Precision::float32, mine_in.data(), nullptr, 4, out,
                        proto::ResultOwner{2, 0}),  // the job has 2 racks
               std::invalid_argument);
}

// The owner of a shard whose values were lost on the way down, its done copy not: nobody else
// misses those values (every other worker has its done copy, the seq's recovery lead too), so
// the gap later results show is asked of the PS at once, not left to the lead.
TEST_F(WorkerTest, AShardsOwnerAsksAtOnceForValuesLostAfterItsDoneCopy) {
  const proto::ResultOwner self{1, 2};
  ASSERT_FALSE(leads_recovery(0, 2, 1, 4, 2));  // seq 0's lead is another worker
  std::vector<float> in(16, 0.5f), got(16, -1.0f);
  const auto id = w.submit(0, quant::Precision::float32, in.data(), got.data(), in.size(), out, self);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 4u);
  PacketSpec done = downward_for(header_of(frags[0]));
  done.flags = flag::kResult;
  done.values.clear();
  w.on_packet(1000, make_packet(done), out);  // seq 0's values copy is lost
  for (std::size_t i = 1; i < 4; ++i) w.on_packet(1000, result_for(frags[i], 8 * 128), out);
  auto asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(header_of(asked[0]).kind, proto::Kind::query);
  EXPECT_EQ(header_of(asked[0]).seq, 0u);
  EXPECT_EQ(w.stats().deferred_gaps, 0u);
  w.on_packet(1200, result_for(frags[0], 8 * 128), out);
  EXPECT_EQ(w.status(id), AllreduceStatus::done);
  for (float v : got) EXPECT_EQ(v, 4.0f);
}

// A receive call's results go in as one batch: each is taken, and the window it frees filled,
// as alone, but the round trip is sampled once, from the most recently sent result (the
// others waited in the receive queue for it).
TEST_F(WorkerTest, ABatchOfResultsIsTakenAsOneAndSamplesTheNewestRoundTrip) {
  std::vector<float> in(40, 0.5f), batched(40), alone(40);
  Worker one_by_one(small_config());
  Outbox out_alone;
  w.submit(0, in, batched, out);
  one_by_one.submit(0, in, alone, out_alone);
  const auto first = sent();  // seqs 0-3: the initial window
  out_alone.clear();
  ASSERT_EQ(first.size(), 4u);
  const auto to_both = [&](Time now, const std::vector<std::uint8_t>& result) {
    w.on_packet(now, result, out);
    one_by_one.on_packet(now, result, out_alone);
    out_alone.clear();
    return sent();
  };
  // The launch window's first answer, then the first answer to a fragment sent after it: the
  // path's first sample, which replaces the launch's (take_rtt_sample).
  const auto second = to_both(10 * kMillisecond, result_for(first[0], 8 * 128));
  ASSERT_EQ(second.size(), 2u);  // seq 4 into the freed slot, and the window grew: seq 5
  EXPECT_EQ(w.smoothed_rtt(), 10 * kMillisecond);
  const auto third = to_both(12 * kMillisecond, result_for(second[0], 8 * 128));
  ASSERT_FALSE(third.empty());
  EXPECT_EQ(w.smoothed_rtt(), 2 * kMillisecond);

  std::vector<std::vector<std::uint8_t>> results;
  for (std::size_t i = 1; i < 4; ++i) results.push_back(result_for(first[i], 8 * 128));
  results.push_back(result_for(second[1], 8 * 128));
  results.push_back(result_for(third[0], 8 * 128));
  std::vector<Arrival> arrivals;
  for (auto& r : results) arrivals.push_back({r, std::nullopt});
  w.on_packets(14 * kMillisecond, arrivals, out);
  for (auto& r : results) one_by_one.on_packet(14 * kMillisecond, r, out_alone);

  // The newest result left at 12 ms: one 2 ms sample, and srtt stays 2 ms.
  EXPECT_EQ(w.smoothed_rtt(), 2 * kMillisecond);
  EXPECT_GT(one_by_one.smoothed_rtt(), 2 * kMillisecond);  // seq 5's 4 ms among them
  EXPECT_EQ(w.stats().results, one_by_one.stats().results);
  EXPECT_EQ(w.congestion_window(), one_by_one.congestion_window());
  std::vector<std::uint32_t> batch_seqs, alone_seqs;
  for (auto& f : sent()) batch_seqs.push_back(header_of(f).seq);
  for (auto& d : out_alone.packets()) alone_seqs.push_back(header_of(d.bytes).seq);
  EXPECT_EQ(batch_seqs, alone_seqs);
  EXPECT_EQ(batched, alone);
}

TEST(WorkerRun, FragmentsNameTheRunAndOnlyThatRunsResultsCount) {
  WorkerConfig c;
  c.values_per_packet = 4;
  c.window = 4;
  c.run = 0x1234;
  Worker w(c);
  Outbox out;
  std::vector<float> in(4, 1.0f), result(4);
  const auto id = w.submit(0, in, result, out);
  ASSERT_EQ(out.size(), 1u);
  auto fragment = out.packets()[0].bytes;
  const auto h = header_of(fragment);
  EXPECT_EQ(h.tensor, proto::wire_tensor(0x1234, id));
  EXPECT_EQ(proto::run_of(h.tensor), 0x1234);

  PacketSpec r;
  r.job = h.job;
  r.seq = h.seq;
  r.flags = flag::kResult;
  r.workers = 0;
  r.values.assign(4, 0);
  r.tensor = proto::wire_tensor(0x1233, id);  // the same seq and counter of an earlier run
  auto stale = make_packet(r);
  w.on_packet(1, stale, out);
  EXPECT_EQ(w.status(id), AllreduceStatus::pending);
  r.tensor = h.tensor;
  auto fresh = make_packet(r);
  w.on_packet(2, fresh, out);
  EXPECT_EQ(w.status(id), AllreduceStatus::done);
}

// Without a run id the worker first asks PS 0 for one, and sends no fragment until it has it.
TEST(WorkerRun, AsksTheFirstServerForItsRunBeforeAnyFragmentLeaves) {
  WorkerConfig c;
  c.values_per_packet = 4;
  c.window = 4;
  c.rack_fan_in = 2;
  c.rank_in_rack = 1;
  c.job_workers = 2;
  c.parameter_servers = 2;
  c.run = std::nullopt;
  c.join_nonce = 0xC0FFEE;
  c.initial_rto = 100;
  c.min_rto = 50;
  c.max_rto = 300;
  c.deadline = 10'000;
  Worker w(c);
  Outbox out;
  std::vector<float> in(8, 1.0f), result(8);
  const auto id = w.submit(0, in, result, out);
  ASSERT_EQ(out.size(), 1u);
  const auto join = header_of(out.packets()[0].bytes);
  EXPECT_EQ(join.kind, proto::Kind::join);
  EXPECT_EQ(join.seq, 0xC0FFEEu);
  EXPECT_EQ(join.ps_index, 0);
  EXPECT_EQ(join.workers_bitmap, 0b10u);
  EXPECT_FALSE(w.run().has_value());
  out.clear();

  // Unanswered: asked again every min_rto, never backed off (a job waits for its last join,
  // PS 0 answers only after every rank asked twice, and under loss a join is often lost more
  // than once).
  EXPECT_EQ(w.next_timer(), 50);
  w.on_timer(50, out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(w.next_timer(), 100);
  w.on_timer(100, out);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(w.next_timer(), 150);
  out.clear();

  // Answers for another worker, or for this rank's previous launch, are not ours.
  PacketSpec answer;
  answer.kind = proto::Kind::joined;
  answer.job = c.job;
  answer.rack_fan_in = 2;
  answer.workers = 0b01;
  answer.seq = 0xC0FFEE;
  answer.tensor = proto::wire_tensor(77, 0);
  answer.values.clear();
  auto other_worker = make_packet(answer);
  w.on_packet(310, other_worker, out);
  answer.workers = 0b10;
  answer.seq = 0xBEEF;
  auto old_launch = make_packet(answer);
  w.on_packet(320, old_launch, out);
  EXPECT_FALSE(w.run().has_value());
  EXPECT_TRUE(out.packets().empty());

  answer.seq = 0xC0FFEE;
  auto ours = make_packet(answer);
  w.on_packet(330, ours, out);
  ASSERT_EQ(w.run(), 77);
  ASSERT_EQ(out.size(), 2u);  // both fragments leave now, naming run 77
  for (const auto& d : out.packets()) {
    const auto h = header_of(d.bytes);
    EXPECT_EQ(h.kind, proto::Kind::fragment);
    EXPECT_EQ(h.tensor, proto::wire_tensor(77, id));
  }
}

// A launcher's run id is claimed from PS 0 before any fragment leaves (issue 49 item 8): taken,
// the fragments name it; refused (another launch of the job used it), the worker fails saying
// so, where it was once answered with that launch's kept results.
TEST(WorkerRun, AGivenRunIsClaimedAndARefusalFailsTheWorkerClearly) {
  for (const bool refused : {false, true}) {
    WorkerConfig c = small_config();
    c.run = 9;
    c.claim_run = true;
    c.join_nonce = 0xC0FFEE;
    Worker w(c);
    Outbox out;
    std::vector<float> in(4, 1.0f), result(4);
    const auto id = w.submit(0, in, result, out);
    ASSERT_EQ(out.size(), 1u);
    const auto join = header_of(out.packets()[0].bytes);
    EXPECT_EQ(join.kind, proto::Kind::join);
    EXPECT_EQ(join.remap_index, proto::kRunClaim | 9u);
    EXPECT_FALSE(w.run().has_value());
    out.clear();
    PacketSpec answer;
    answer.kind = proto::Kind::joined;
    answer.job = c.job;
    answer.rack = c.rack;
    answer.rack_fan_in = c.rack_fan_in;
    answer.job_fan_in = c.job_fan_in;
    answer.workers = 1u << c.rank_in_rack;
    answer.seq = c.join_nonce;
    answer.tensor = proto::wire_tensor(9, 0);
    answer.remap_index = refused ? proto::kRunRefused : 0;
    answer.values.clear();
    w.on_packet(kMillisecond, make_packet(answer), out);
    if (refused) {
      EXPECT_TRUE(w.failed());
      EXPECT_NE(w.error().find("run 9 was used by another launch"), std::string::npos) << w.error();
      EXPECT_TRUE(out.packets().empty());
    } else {
      ASSERT_EQ(w.run(), 9);
      ASSERT_FALSE(out.packets().empty());
      EXPECT_EQ(header_of(out.packets()[0].bytes).tensor, proto::wire_tensor(9, id));
    }
  }
}

// The window sent on the join's answer waits for the job's last worker to get its own (a lost
// answer: a whole join interval): its answers time the launch, and stand only until the first
// fragment sent after the first result is answered, which replaces them.
TEST(WorkerRun, TheLaunchWindowsRoundTripsStandOnlyUntilThePathIsSampled) {
  WorkerConfig c = small_config();
  c.run = std::nullopt;
  c.join_nonce = 0xC0FFEE;
  c.job_workers = 2;
  c.rack_fan_in = 2;
  c.job_fan_in = 1;
  c.rack = 0;
  c.rank_in_rack = 1;
  c.initial_window = 2;
  Worker w(c);
  Outbox out;
  std::vector<float> in(4 * 3, 1.0f), result(4 * 3);
  w.submit(0, in, result, out);
  out.clear();
  PacketSpec answer;
  answer.kind = proto::Kind::joined;
  answer.job = c.job;
  answer.rack = c.rack;
  answer.rack_fan_in = c.rack_fan_in;
  answer.job_fan_in = c.job_fan_in;
  answer.workers = 0b10;
  answer.seq = c.join_nonce;
  answer.tensor = proto::wire_tensor(5, 0);
  answer.values.clear();
  w.on_packet(kMillisecond, make_packet(answer), out);
  std::vector<std::vector<std::uint8_t>> first;
  for (const auto& d : out.packets()) first.push_back(d.bytes);
  out.clear();
  ASSERT_EQ(first.size(), 2u);
  // The other worker's answer was lost: the first window is answered 9 ms late. Until the
  // path is sampled, that is all there is to go by.
  w.on_packet(10 * kMillisecond, result_for(first[0], 8), out);
  EXPECT_EQ(w.smoothed_rtt(), 9 * kMillisecond);
  ASSERT_EQ(out.size(), 1u);  // seq 2 leaves on that result
  const auto third = out.packets()[0].bytes;
  out.clear();
  w.on_packet(10 * kMillisecond + 20 * kMicrosecond, result_for(first[1], 8), out);
  EXPECT_GT(w.smoothed_rtt(), 9 * kMillisecond);
  w.on_packet(10 * kMillisecond + 30 * kMicrosecond, result_for(third, 8), out);
  EXPECT_EQ(w.smoothed_rtt(), 30 * kMicrosecond);  // the path's round trip, not the launch's
}

TEST(WorkerRun, FailsClearlyWhenNoServerAnswersTheHandshake) {
  WorkerConfig c;
  c.values_per_packet = 4;
  c.window = 4;
  c.run = std::nullopt;
  c.join_nonce = 7;
  c.initial_rto = 100;
  c.min_rto = 50;
  c.max_rto = 100;
  c.deadline = 1000;
  Worker w(c);
  Outbox out;
  std::vector<float> in(4, 1.0f), result(4);
  const auto id = w.submit(0, in, result, out);
  for (Time t = 100; t <= 1000; t += 100) w.on_timer(t, out);
  EXPECT_TRUE(w.failed());
  EXPECT_NE(w.error().find("no run id"), std::string::npos) << w.error();
  EXPECT_EQ(w.status(id), AllreduceStatus::failed);
  EXPECT_FALSE(w.next_timer().has_value());
}

TEST_F(WorkerTest, DuplicateResultsAreIgnored) {
  w.submit(0, input, output, out);
  auto frags = sent();
  auto r = result_for(frags[0], 8);
  w.on_packet(10, r, out);
  w.on_packet(11, r, out);
  EXPECT_EQ(w.stats().results, 1u);
  EXPECT_EQ(w.stats().duplicate_results, 1u);
}

TEST_F(WorkerTest, TimeoutResendsWithTheResendFlagAndBacksOff) {
  w.submit(0, input, output, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 3u);
  EXPECT_EQ(*w.next_timer(), 10 * kMillisecond);
  w.on_timer(10 * kMillisecond, out);
  ASSERT_EQ(sent().size(), 1u);  // before the job's first answer the oldest asks for all
  // The job answers (a resent fragment's answer: no round-trip sample, so no tail probe).
  w.on_packet(11 * kMillisecond, result_for(frags[0], 8), out);
  sent();
  EXPECT_EQ(*w.next_timer(), 30 * kMillisecond);  // 1 and 2 waited with 0 (10 + 20)
  w.on_timer(30 * kMillisecond, out);
  auto resent = sent();
  ASSERT_EQ(resent.size(), 2u);
  for (auto& p : resent) EXPECT_TRUE(header_of(p).has(flag::kResend));
  EXPECT_EQ(*w.next_timer(), 50 * kMillisecond);  // each one's timeout doubled
  EXPECT_EQ(w.stats().timeouts, 3u);
}

// Before the job's first answer it may not have started (a worker's join lost, or its process
// late): only the oldest fragment times out, and the others wait with it. Each timeout resent
// the whole window before: 704 resends in one simulated run (two racks, 0.1 % loss, seed 10),
// a window per worker and timeout while a lost join was asked again.
TEST_F(WorkerTest, BeforeTheJobsFirstAnswerOnlyTheOldestFragmentTimesOut) {
  w.submit(0, input, output, out);
  ASSERT_EQ(sent().size(), 3u);
  w.on_timer(10 * kMillisecond, out);
  auto asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(header_of(asked[0]).seq, 0u);
  EXPECT_TRUE(header_of(asked[0]).has(flag::kResend));
  EXPECT_EQ(*w.next_timer(), 30 * kMillisecond);  // the oldest's doubled timer, for all three
  w.on_timer(30 * kMillisecond, out);
  asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(header_of(asked[0]).seq, 0u);
  EXPECT_EQ(w.stats().timeouts, 2u);
}

// Random loss is not a wrong round-trip estimate: a timeout doubles only the timer of the
// fragment it resent, so fragments sent afterwards keep the estimator's timeout.
TEST_F(WorkerTest, ATimeoutBacksOffOnlyItsOwnFragment) {
  std::vector<float> big(4 * 6, 1.0f), result(4 * 6);
  w.submit(0, big, result, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 4u);  // the initial window
  w.on_timer(10 * kMillisecond, out);
  ASSERT_EQ(sent().size(), 1u);  // the oldest asks for all: 0 now on 20 ms, 1-3 wait with it
  // 0's answer arrives: the window moves on, and what leaves now has the plain timeout, 10 ms,
  // not a doubled one.
  w.on_packet(11 * kMillisecond, result_for(frags[0], 8), out);
  auto fresh = sent();
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(header_of(fresh[0]).seq, 4u);
  EXPECT_EQ(*w.next_timer(), 21 * kMillisecond);  // 11 + 10; 1-3 are due at 30
  w.on_timer(21 * kMillisecond, out);
  EXPECT_EQ(sent().size(), fresh.size());  // those time out; 1-3 wait for their timer
  EXPECT_EQ(*w.next_timer(), 30 * kMillisecond);
  w.on_timer(30 * kMillisecond, out);
  EXPECT_EQ(sent().size(), 3u);  // 1, 2 and 3
  EXPECT_EQ(*w.next_timer(), 41 * kMillisecond);  // the new ones on 20 ms since 21; 1-3 on 50
}

// A loss among the last fragments has no later result to reveal it: two round trips after the
// last result, the newest unanswered fragment is probed, long before the RTO's floor. One probe
// per silence, checked again once; then the timers.
TEST_F(WorkerTest, ATailLossIsProbedAfterTwoRoundTripsNotTheTimeoutsFloor) {
  WorkerConfig c = leading(small_config(), 2);
  c.min_rto = 20 * kMillisecond;  // far above the round trips below
  Worker w(c);
  std::vector<float> four(4 * 4, 1.0f), result(4 * 4);
  w.submit(0, four, result, out);
  auto packets = sent();
  ASSERT_EQ(packets.size(), 4u);
  // Round trips of 2 ms; fragments 2 and 3, the last, get no result.
  w.on_packet(2 * kMillisecond, result_for(packets[0], 8), out);
  const Time t = 2 * kMillisecond + 100 * kMicrosecond;
  w.on_packet(t, result_for(packets[1], 8), out);
  const Duration srtt = w.smoothed_rtt();
  const Time probe = *w.next_timer();
  EXPECT_GE(probe, t + 2 * srtt);
  EXPECT_LT(probe, t + 4 * srtt);
  EXPECT_LT(probe, 20 * kMillisecond);
  w.on_timer(probe, out);
  auto probed = sent();
  ASSERT_EQ(probed.size(), 1u);
  EXPECT_EQ(header_of(probed[0]).seq, 3u);  // the newest
  EXPECT_TRUE(header_of(probed[0]).has(flag::kResend));
  EXPECT_EQ(w.stats().probes, 1u);
  // No second probe: the probe is checked again like a lead's resend, then the timers.
  EXPECT_EQ(*w.next_timer(), probe + 2 * kLeadWaitRoundTrips * srtt);
  // The probe's answer reveals 2 by the time rule: it left two round trips before 3's probe.
  w.on_packet(probe + srtt, result_for(probed[0], 8), out);
  auto revealed = sent();
  ASSERT_EQ(revealed.size(), 1u);
  EXPECT_EQ(header_of(revealed[0]).seq, 2u);
  EXPECT_EQ(w.stats().timeouts, 0u);
}

// A lost probe, or its lost answer, at an iteration's end holds every worker of the job: it is
// resent after two recovery waits, not the timer's floor.
TEST_F(WorkerTest, ALostProbeIsCheckedAgainBeforeTheTimer) {
  WorkerConfig c = leading(small_config(), 2);
  c.min_rto = 20 * kMillisecond;
  Worker w(c);
  std::vector<float> four(4 * 4, 1.0f), result(4 * 4);
  w.submit(0, four, result, out);
  auto packets = sent();
  w.on_packet(2 * kMillisecond, result_for(packets[0], 8), out);
  w.on_packet(2 * kMillisecond + 100 * kMicrosecond, result_for(packets[1], 8), out);
  w.on_packet(2 * kMillisecond + 200 * kMicrosecond, result_for(packets[2], 8), out);
  const Duration srtt = w.smoothed_rtt();
  const Time probe = *w.next_timer();
  w.on_timer(probe, out);
  ASSERT_EQ(sent().size(), 1u);
  ASSERT_EQ(w.stats().probes, 1u);
  const Time recheck = probe + 2 * kLeadWaitRoundTrips * srtt;
  ASSERT_LT(recheck, 20 * kMillisecond);
  w.on_timer(recheck - 1, out);
  EXPECT_TRUE(sent().empty());
  w.on_timer(recheck, out);
  auto again = sent();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(header_of(again[0]).seq, 3u);
  EXPECT_TRUE(header_of(again[0]).has(flag::kResend));
  EXPECT_EQ(w.stats().fallback_resends, 1u);
  EXPECT_EQ(w.stats().timeouts, 0u);
  EXPECT_GE(*w.next_timer(), recheck + 20 * kMillisecond);  // checked once: then the timer
}

// Results re-arm the probe: a window that keeps getting answers is never probed.
TEST_F(WorkerTest, AnAnsweredWindowIsNeverProbed) {
  WorkerConfig c = small_config();
  c.min_rto = 20 * kMillisecond;
  Worker w(c);
  std::vector<float> big(4 * 64, 1.0f), result(4 * 64);
  w.submit(0, big, result, out);
  std::deque<std::vector<std::uint8_t>> waiting;
  for (auto& p : sent()) waiting.push_back(p);
  for (Time now = kMillisecond; !waiting.empty(); now += kMillisecond) {
    // An answer every millisecond, whatever the round trip; any timer due fires first.
    if (*w.next_timer() <= now) w.on_timer(now, out);
    w.on_packet(now, result_for(waiting.front(), 8), out);
    waiting.pop_front();
    for (auto& p : sent()) waiting.push_back(p);
  }
  EXPECT_EQ(w.stats().probes, 0u);
  EXPECT_EQ(w.stats().results, 64u);
}

// Only ECN marks cut the congestion window, never a timeout, however long the silence: in a
// job, a worker's silence is as often another worker's recovery as its own loss. A cut for it
// (after three silent RTOs, as QUIC's persistent congestion) once left a two-rack job at 10 %
// loss stalled for 1.9 s where it now takes 23 ms (docs/engines.md §3.6).
TEST_F(WorkerTest, TimeoutsNeverCutTheWindowHoweverLongTheSilence) {
  WorkerConfig c = small_config();
  c.initial_window = 8;
  c.reorder_threshold = 0;  // the timers alone
  Worker w(c);
  std::vector<float> big(4 * 8, 1.0f), result(4 * 8);
  w.submit(0, big, result, out);
  auto packets = sent();
  ASSERT_EQ(packets.size(), 8u);
  // 0 is lost; the others are answered just before its timer (the initial RTO, 10 ms) fires.
  for (std::size_t i = 1; i < 8; ++i)
    w.on_packet(9 * kMillisecond, result_for(packets[i], 8), out);
  // Then nothing at all is answered: its backed-off timer fires through 600 ms of silence,
  // about 60 of its round trips.
  for (Time now = 10 * kMillisecond; now < 600 * kMillisecond;) {
    now = *w.next_timer();
    w.on_timer(now, out);
  }
  EXPECT_FALSE(w.failed());
  EXPECT_GE(w.stats().timeouts, 5u);
  EXPECT_EQ(w.stats().window_cuts, 0u);
  EXPECT_EQ(w.congestion_window(), 8.0);  // at the ceiling, never cut
}

// A ring longer than the window: new fragments keep leaving past a fragment waiting for
// recovery until the ring, not the window, runs out.
TEST_F(WorkerTest, ARingLongerThanTheWindowLetsTheWorkerSendPastAHole) {
  WorkerConfig c = small_config();
  c.window = 2;
  c.ring = 8;
  c.initial_window = 0;
  Worker w(c);
  std::vector<float> big(4 * 12, 1.0f), result(4 * 12);
  w.submit(0, big, result, out);
  std::vector<std::vector<std::uint8_t>> fresh;
  auto collect = [&] {
    for (auto& p : sent())
      if (!header_of(p).has(flag::kResend)) fresh.push_back(p);
  };
  collect();
  ASSERT_EQ(fresh.size(), 2u);  // the window, not the 8 slots of the ring
  // 0 gets no result (its resends neither); every later fragment does, one at a time.
  for (std::size_t i = 1; i < fresh.size(); ++i) {
    w.on_packet(1000 + i, result_for(fresh[i], 8), out);
    collect();
  }
  ASSERT_EQ(fresh.size(), 8u);  // seqs 0..7: the ring is full behind 0
  EXPECT_EQ(header_of(fresh.back()).seq, 7u);
  WorkerConfig bad = small_config();
  bad.ring = 4;  // below the window
  EXPECT_THROW(Worker{bad}, std::invalid_argument);
  bad.ring = 24;  // not a power of two
  EXPECT_THROW(Worker{bad}, std::invalid_argument);
}

// Linear placement: every job's lane l starts at aggregator l (the paper's Fig. 14 strawman);
// hashed placement spreads jobs over the pool.
TEST_F(WorkerTest, LinearPlacementUsesTheLaneItself) {
  WorkerConfig c = small_config();
  c.placement = Placement::linear;
  Worker w(c);
  std::vector<float> big(4 * 12, 1.0f), result(4 * 12);
  w.submit(0, big, result, out);
  auto packets = sent();
  ASSERT_EQ(packets.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_EQ(header_of(packets[i]).aggregator, i);
  Placement p;
  EXPECT_TRUE(parse_placement("hash", p) && p == Placement::hash);
  EXPECT_FALSE(parse_placement("modulo", p));
}

TEST_F(WorkerTest, GapInResultsTriggersOneFastResend) {
  std::vector<float> big(4 * 6, 1.0f), result(4 * 6);
  WorkerConfig c = leading(small_config(), 0);
  c.initial_window = 8;
  Worker wide(c);
  wide.submit(0, big, result, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 6u);
  for (int i = 1; i <= 3; ++i) {  // results for 1..3 but not 0
    auto r = result_for(frags[i], 8);
    wide.on_packet(100, r, out);
  }
  auto resent = sent();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(header_of(resent[0]).seq, 0u);
  EXPECT_TRUE(header_of(resent[0]).has(flag::kResend));
  auto r4 = result_for(frags[4], 8);
  wide.on_packet(101, r4, out);
  EXPECT_TRUE(sent().empty());  // only once per transmission
  EXPECT_EQ(wide.stats().fast_resends, 1u);
}

// With two PS shards, odd seqs go to PS 1: its answers overtaking PS 0's are no sign of loss,
// but a gap among one shard's own answers still is, once 3 of that shard's later seqs overtook.
TEST_F(WorkerTest, OnlyAGapWithinOnePsShardTriggersAFastResend) {
  std::vector<float> big(4 * 16, 1.0f), result(4 * 16);
  WorkerConfig c = leading(small_config(), 2);
  c.window = c.ring = c.initial_window = 16;
  c.parameter_servers = 2;
  Worker wide(c);
  wide.submit(0, big, result, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 16u);
  auto answer = [&](std::initializer_list<int> seqs) {
    for (int i : seqs) {
      auto r = result_for(frags[i], 8);
      wide.on_packet(100, r, out);
    }
  };
  answer({0, 1, 3, 5, 7, 9, 11, 13, 15});  // PS 1 answers all; PS 0's 2, 4, ... are late
  EXPECT_TRUE(sent().empty());
  answer({4, 6});  // two of PS 0's later seqs overtook 2: not yet a gap
  EXPECT_TRUE(sent().empty());
  answer({8});     // the third
  auto resent = sent();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(header_of(resent[0]).seq, 2u);
  EXPECT_EQ(wide.stats().fast_resends, 1u);
}

TEST_F(WorkerTest, EcnHalvesTheWindowAndCleanResultsGrowIt) {
  std::vector<float> big(4 * 8, 1.0f), result(4 * 8);
  w.submit(0, big, result, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 4u);
  EXPECT_EQ(w.congestion_window(), 4.0);
  auto marked = result_for(frags[0], 8, flag::kEcn);
  w.on_packet(100, marked, out);
  EXPECT_EQ(w.congestion_window(), 2.0);
  EXPECT_EQ(w.stats().ecn_marks, 1u);
  EXPECT_EQ(w.stats().window_cuts, 1u);
  auto marked_again = result_for(frags[1], 8, flag::kEcn);
  w.on_packet(101, marked_again, out);
  EXPECT_EQ(w.congestion_window(), 2.0);  // once per round trip
  sent();
  auto clean = result_for(frags[2], 8);
  w.on_packet(102, clean, out);
  EXPECT_EQ(w.congestion_window(), 2.5);
}

TEST(CongestionWindowTest, SlowStartDoublesUpToTheThresholdThenGrowsByOnePerWindow) {
  CongestionWindow w(2, 64);
  std::uint32_t seq = 0;
  w.on_result(false, seq++, 100);
  w.on_result(false, seq++, 100);
  EXPECT_EQ(w.value(), 4.0);  // +1 per result: doubled in one round trip
  for (int i = 0; i < 60; ++i) w.on_result(false, seq++, 100);
  EXPECT_EQ(w.value(), 64.0);  // capped at the ceiling
  w.on_result(true, seq++, 200);
  EXPECT_EQ(w.value(), 32.0);
  EXPECT_EQ(w.slow_start_threshold(), 32.0);
  w.on_result(false, 200, 300);  // past the cut: recovery over; congestion avoidance
  EXPECT_DOUBLE_EQ(w.value(), 32.0 + 1.0 / 32);
  w.on_result(true, 201, 300);
  EXPECT_DOUBLE_EQ(w.value(), (32.0 + 1.0 / 32) / 2);
  EXPECT_EQ(w.decreases(), 2u);
}

TEST(CongestionWindowTest, DisabledStaysAtTheCeilingWhateverHappens) {
  CongestionWindow w(2, 16, /*enabled=*/false);
  EXPECT_EQ(w.allowed(), 16u);
  w.on_result(true, 0, 10);
  w.on_result(false, 2, 10);
  EXPECT_EQ(w.allowed(), 16u);
  EXPECT_EQ(w.decreases(), 0u);
}

TEST(AggregatorWindowTest, ShrinksWithTheCollidedShareAndGrowsAfterACleanRound) {
  AggregatorWindow a(8, 64);
  for (int i = 0; i < 8; ++i) a.on_result(true);  // a whole round collided: F = 1
  EXPECT_DOUBLE_EQ(a.collided_share(), 1.0 / 16);
  EXPECT_DOUBLE_EQ(a.value(), 8 * (1 - 1.0 / 32));
  for (int i = 0; i < 7; ++i) a.on_result(false);
  EXPECT_DOUBLE_EQ(a.value(), 8 * (1 - 1.0 / 32));  // the round is not over (7 < 7.75)
  a.on_result(false);
  EXPECT_DOUBLE_EQ(a.value(), 8 * (1 - 1.0 / 32) + 1);
  a.cap(5);
  EXPECT_EQ(a.allowed(), 5u);
}

TEST_F(WorkerTest, AggregatorWindowFollowsCollidedResultsUnderTheCongestionWindow) {
  WorkerConfig c = small_config();
  c.aggregator_window = true;
  Worker aw(c);
  std::vector<float> big(16 * 4, 1.0f), result(16 * 4);
  aw.submit(0, big, result, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 4u);  // initial_window 4
  for (std::size_t i = 0; i < 4; ++i) aw.on_packet(100, result_for(frags[i], 8, flag::kCollision), out);
  EXPECT_EQ(aw.stats().collided_results, 4u);
  EXPECT_LT(aw.aggregator_window(), 4.0);  // a round of collided results
  EXPECT_EQ(aw.congestion_window(), 8.0);  // the links are fine: slow start to the ceiling
  // Less than the congestion window's 8 in flight, but no less than half of it.
  EXPECT_EQ(sent().size(), 4u);
}

TEST_F(WorkerTest, FloatRequestResendsAsFloat32) {
  w.submit(0, input, output, out);
  auto frags = sent();
  auto req = make_packet([&] {
    PacketSpec r;
    r.job = 3;
    r.seq = 1;
    r.flags = flag::kFloatRequest;
    r.workers = 0;
    r.values = {};
    return r;
  }());
  w.on_packet(50, req, out);
  auto floats = sent();
  ASSERT_EQ(floats.size(), 1u);
  const auto h = header_of(floats[0]);
  EXPECT_TRUE(h.has(flag::kFloatPayload));
  EXPECT_EQ(h.seq, 1u);
  float f;
  const auto v = values_of(floats[0]);
  std::memcpy(&f, &v[0], 4);
  EXPECT_EQ(f, 0.5f);
  w.on_packet(51, req, out);
  EXPECT_TRUE(sent().empty());  // already sending floats
}

TEST_F(WorkerTest, UnrepresentableValuesTravelAsFloats) {
  input[1] = std::numeric_limits<float>::quiet_NaN();
  input[5] = 1e30f;
  w.submit(0, input, output, out);
  auto frags = sent();
  EXPECT_TRUE(header_of(frags[0]).has(flag::kFloatPayload));
  EXPECT_TRUE(header_of(frags[1]).has(flag::kFloatPayload));
  EXPECT_FALSE(header_of(frags[2]).has(flag::kFloatPayload));
  // A float result is copied, not dequantized.
  PacketSpec r;
  r.job = 3;
  r.seq = 0;
  r.flags = flag::kResult | flag::kFloatPayload;
  r.workers = 0;
  float three = 3.0f;
  std::int32_t bits;
  std::memcpy(&bits, &three, 4);
  r.values.assign(4, bits);
  auto p = make_packet(r);
  w.on_packet(10, p, out);
  EXPECT_EQ(output[0], 3.0f);
}

TEST_F(WorkerTest, GivesUpWithAClearErrorAtTheDeadline) {
  const auto id = w.submit(0, input, output, out);
  Time now = 0;
  while (auto t = w.next_timer()) {
    now = *t;
    w.on_timer(now, out);
  }
  EXPECT_TRUE(w.failed());
  EXPECT_GE(now, 1 * kSecond);
  EXPECT_NE(w.error().find("no result for fragment"), std::string::npos) << w.error();
  EXPECT_EQ(w.status(id), AllreduceStatus::failed);
  EXPECT_THROW(w.submit(now, input, output, out), std::runtime_error);
}

TEST_F(WorkerTest, RemapMovesTheSlotsNextFragment) {
  WorkerConfig c = small_config();
  c.initial_window = 8;
  Worker wide(c);
  const auto frags = send_eight_of_nine(wide);
  ASSERT_EQ(frags.size(), 8u);
  wide.on_packet(10, planning_result(frags[0], 4242), out);
  auto next = sent();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(header_of(next[0]).seq, 8u);  // slot 0 again
  EXPECT_EQ(header_of(next[0]).aggregator, 4242u);
}

// A home lent before the first send (control/home_lending.h) moves the first lanes, which every
// worker of the job computes alike, and their cap.
TEST_F(WorkerTest, AHomeLentBeforeTheFirstSendMovesTheFirstLanes) {
  WorkerConfig c = small_config();
  c.initial_window = 8;
  c.home = HomeSlice{100, 4, 1};
  Worker lent(c);
  lent.set_home(HomeSlice{96, 8, 1});
  const auto frags = send_eight_of_nine(lent);  // cap 8: the own home's 4 would hold 4 back
  ASSERT_EQ(frags.size(), 8u);
  for (std::uint32_t i = 0; i < 8; ++i) EXPECT_EQ(header_of(frags[i]).aggregator, 96 + i);
}

// Once fragments are out, the first lanes stand (other workers may have used them already);
// a seq whose plan never came takes the new home's turn, as the PS now plans.
TEST_F(WorkerTest, AHomeLentAfterTheFirstSendMovesOnlyWhatALostPlanFallsBackOn) {
  WorkerConfig c = small_config();
  c.initial_window = 8;  // the cap, not the window, holds the first send to 4
  c.home = HomeSlice{100, 4, 1};
  Worker lent(c);
  lent.submit(0, nine_in, nine_out, out);
  const auto first = sent();
  ASSERT_EQ(first.size(), 4u);  // the home's cap
  lent.set_home(HomeSlice{96, 8, 1});
  Time now = 10;
  for (const auto& f : first) lent.on_packet(now++, result_for(f, 8), out);  // no plans
  std::map<std::uint32_t, std::uint32_t> aggregator_of;
  for (const auto& f : sent()) aggregator_of[header_of(f).seq] = header_of(f).aggregator;
  ASSERT_TRUE(aggregator_of.count(4));
  for (const auto& [seq, aggregator] : aggregator_of)
    EXPECT_EQ(aggregator, seq < 8 ? 100 + seq % 4 : 96 + seq % 8) << seq;
  EXPECT_EQ(aggregator_of.count(8), 1u);
}

// A plan's cap holds its seq back until fewer fragments than the cap may hold aggregators:
// then its aggregator is free of the job's own earlier seqs (aggregator_planner.h).
TEST_F(WorkerTest, APlansCapHoldsItsSeqUntilThatFewAreOut) {
  WorkerConfig c = small_config();
  c.initial_window = 8;
  Worker wide(c);
  const auto frags = send_eight_of_nine(wide);
  ASSERT_EQ(frags.size(), 8u);
  wide.on_packet(10, planning_result(frags[0], proto::encode_lane_assignment({4242, 6})), out);
  EXPECT_TRUE(sent().empty());  // 7 out, cap 6
  wide.on_packet(11, result_for(frags[1], 8), out);
  EXPECT_TRUE(sent().empty());  // 6 out
  wide.on_packet(12, result_for(frags[2], 8), out);
  auto next = sent();  // 5 out: seq 8 leaves, on its planned aggregator
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(header_of(next[0]).seq, 8u);
  EXPECT_EQ(header_of(next[0]).aggregator, 4242u);
}

// Drives a planned worker whose home holds 4 aggregators (cap 4, window 8) through a long
// tensor, answering the oldest unanswered fragment every `step`: reports the most fragments
// sent once and unanswered at any moment (those that may hold an aggregator).
class CappedRun {
 public:
  CappedRun() : worker_(config()), in_(4 * 1000, 1.0f), result_(in_.size()) {}
  static WorkerConfig config() {
    WorkerConfig c = small_config();
    c.window = 8;
    c.ring = 64;
    c.initial_window = 8;
    c.home = HomeSlice{100, 4, 1};
    return c;
  }
  void start(Time now) {
    worker_.submit(now, in_, result_, out_);
    collect();
  }
  // Answers `results` fragments, oldest first, `step` apart.
  std::uint32_t answer(Time& now, int results, Duration step) {
    std::uint32_t most = 0;
    for (int i = 0; i < results && !unanswered_.empty(); ++i) {
      now += step;
      const auto oldest = unanswered_.begin();
      PacketSpec r;
      const auto h = header_of(oldest->second);
      r.job = h.job;
      r.tensor = h.tensor;
      r.seq = h.seq;
      r.aggregator = h.aggregator;
      r.flags = flag::kResult;
      r.workers = 0;
      r.values.assign(h.value_count, 8);
      unanswered_.erase(oldest);
      resent_.erase(h.seq);
      worker_.on_packet(now, make_packet(r), out_);
      collect();
      most = std::max(most, sent_once());
    }
    return most;
  }
  // Lets every unanswered fragment time out and be resent (max_rto is 80 ms).
  void time_out(Time& now) {
    now += 100 * kMillisecond;
    worker_.on_timer(now, out_);
    collect();
  }
  std::uint32_t sent_once() const {
    return static_cast<std::uint32_t>(unanswered_.size() - resent_.size());
  }

 private:
  void collect() {
    for (auto& d : out_.packets()) {
      const auto h = header_of(d.bytes);
      EXPECT_GE(h.aggregator, 100u);  // never outside its home
      EXPECT_LT(h.aggregator, 104u);
      unanswered_[h.seq] = d.bytes;
      if (h.has(flag::kResend)) resent_.insert(h.seq);
    }
    out_.clear();
  }
  Worker worker_;
  Outbox out_;
  std::vector<float> in_, result_;
  std::map<std::uint32_t, std::vector<std::uint8_t>> unanswered_;
  std::set<std::uint32_t> resent_;
};

// A planned worker keeps to its plan's cap however clean its results: the cap keeps every
// seq's aggregator free of the job's own earlier seqs, and a fragment past it would meet one
// and go on to the PS, one packet per worker. (An allowance past the cap, grown by clean
// results, was the default until issue 48: with every tenant present, its collisions reached
// the PS link before any mark could say it was full, and lossless random scenarios ran at
// 0.14-0.46 of static slices; docs/sharing.md.)
TEST(PlannedCap, CleanResultsNeverLetAWorkerPastItsCap) {
  CappedRun run;
  Time now = 0;
  run.start(now);
  EXPECT_EQ(run.sent_once(), 4u);  // the cap, before any result
  EXPECT_EQ(run.answer(now, 4, kMillisecond), 4u);
  EXPECT_EQ(run.answer(now, 500, kMillisecond), 4u);
}

TEST_F(WorkerTest, EmptyTensorCompletesAtOnce) {
  std::vector<float> none;
  const auto id = w.submit(0, none, none, out);
  EXPECT_TRUE(sent().empty());
  EXPECT_EQ(w.status(id), AllreduceStatus::done);
  EXPECT_EQ(w.take_completed(), std::vector<std::uint32_t>{id});
}

TEST_F(WorkerTest, SeveralTensorsShareOneSequenceSpace) {
  std::vector<float> a(4, 1.0f), b(6, 1.0f), ra(4), rb(6);
  const auto ta = w.submit(0, a, ra, out);
  const auto tb = w.submit(0, b, rb, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 3u);
  EXPECT_EQ(header_of(frags[0]).tensor, ta);
  EXPECT_EQ(header_of(frags[1]).tensor, tb);
  EXPECT_EQ(header_of(frags[2]).seq, 2u);
  for (auto& f : frags) {
    auto r = result_for(f, 256);
    w.on_packet(5, r, out);
  }
  EXPECT_EQ(w.take_completed(), (std::vector<std::uint32_t>{ta, tb}));
  EXPECT_EQ(rb[5], 1.0f);
}

// Finished tensors leave after the batch; the worker must keep sending from the next one
// meanwhile, and find its way to a tensor submitted after all of them left.
TEST_F(WorkerTest, ABatchFinishingATensorKeepsSendingFromTheNext) {
  std::vector<float> a(8, 1.0f), b(12, 1.0f), c(4, 1.0f), ra(8), rb(12), rc(4);
  const auto ta = w.submit(0, a, ra, out);  // seqs 0-1
  const auto tb = w.submit(0, b, rb, out);  // seqs 2-4
  auto first = sent();
  ASSERT_EQ(first.size(), 4u);  // the initial window: seqs 0-3

  auto deliver = [&](const std::vector<std::vector<std::uint8_t>>& fragments) {
    std::vector<std::vector<std::uint8_t>> results;
    for (auto& f : fragments) results.push_back(result_for(f, 8 * 256));
    std::vector<Arrival> arrivals;
    for (auto& r : results) arrivals.push_back({r, std::nullopt});
    w.on_packets(1 * kMillisecond, arrivals, out);
  };
  deliver({first[0], first[1], first[2]});  // finishes a
  EXPECT_EQ(w.take_completed(), std::vector<std::uint32_t>{ta});
  EXPECT_EQ(w.status(ta), AllreduceStatus::done);
  EXPECT_EQ(w.status(tb), AllreduceStatus::pending);
  auto second = sent();
  ASSERT_EQ(second.size(), 1u);  // b's last fragment, all that is left
  EXPECT_EQ(header_of(second[0]).seq, 4u);
  EXPECT_EQ(header_of(second[0]).tensor, tb);

  deliver({first[3], second[0]});  // finishes b: no tensor left
  EXPECT_EQ(w.take_completed(), std::vector<std::uint32_t>{tb});
  EXPECT_TRUE(w.idle());

  const auto tc = w.submit(2 * kMillisecond, c, rc, out);
  auto third = sent();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(header_of(third[0]).seq, 5u);
  EXPECT_EQ(header_of(third[0]).tensor, tc);
  deliver(third);
  EXPECT_EQ(w.take_completed(), std::vector<std::uint32_t>{tc});
  for (const auto* r : {&ra, &rb, &rc})
    for (float v : *r) EXPECT_EQ(v, 8.0f);
}

TEST(WorkerConfigTest, RejectsImpossibleConfigurations) {
  auto with = [](auto change) {
    WorkerConfig c = small_config();
    change(c);
    return c;
  };
  EXPECT_THROW(Worker(with([](auto& c) { c.window = 6; })), std::invalid_argument);
  EXPECT_THROW(Worker(with([](auto& c) { c.rank_in_rack = 4; })), std::invalid_argument);
  EXPECT_THROW(Worker(with([](auto& c) { c.values_per_packet = 0; })), std::invalid_argument);
  EXPECT_THROW(Worker(with([](auto& c) { c.scale = 0; })), std::invalid_argument);
  EXPECT_THROW(Worker(with([](auto& c) { c.job_workers = 2; })), std::invalid_argument);
  // Asking for a run without a nonce would look like the same process in every launch.
  EXPECT_THROW(Worker(with([](auto& c) { c.run = std::nullopt; })), std::invalid_argument);
  Worker ok(small_config());
  Outbox out;
  std::vector<float> a(4), b(5);
  EXPECT_THROW(ok.submit(0, a, b, out), std::invalid_argument);
}

}  // namespace
}  // namespace atp::engines

namespace atp::engines {
namespace {

TEST(WorkerIsolation, IgnoresResultsWithAWrongTokenOrFromStrangers) {
  WorkerConfig c = small_config();
  c.token = 5;
  Worker w(c);
  Outbox out;
  std::vector<float> in(4, 1.0f), res(4);
  w.submit(0, in, res, out);
  ASSERT_EQ(header_of(out.packets()[0].bytes).token, 5u);
  PacketSpec r;
  r.job = 3;
  r.flags = flag::kResult;
  r.workers = 0;
  r.values.assign(4, 256);
  auto p = make_packet(r);
  w.on_packet(1, p, out, kSwitch);  // token 0
  proto::store_be32(p.data() + 40, 5);
  w.on_packet(2, p, out, kUnknownNode);
  EXPECT_EQ(w.stats().forged, 2u);
  EXPECT_EQ(w.stats().results, 0u);
  w.on_packet(3, p, out, kSwitch);
  EXPECT_EQ(w.stats().results, 1u);
}

// Loss recovery at scale (engines.md §3.6): one worker per seq, the lead, resends a gap at once;
// the others leave it to the lead's recovery, and resend only if neither a result nor a
// request came within lead_wait() (kLeadWaitRoundTrips smoothed round trips), or at once when
// the PS asks them by name.
class LossRecovery : public WorkerTest {
 protected:
  // A request from the PS for `fragment`'s seq, naming `workers` of rack `rack`.
  std::vector<std::uint8_t> request_for(const std::vector<std::uint8_t>& fragment,
                                        std::uint8_t rack, std::uint32_t workers) {
    const auto h = header_of(fragment);
    PacketSpec r = downward_for(h);
    r.flags = flag::kFloatRequest;
    r.rack = rack;
    r.rack_fan_in = h.rack_fan_in;
    r.job_fan_in = h.job_fan_in;
    r.workers = workers;
    r.values = {};
    return make_packet(r);
  }
  // Fragments 1..3 answered at 2 ms, not 0: a gap at 0 by the overtaking rule.
  std::vector<std::vector<std::uint8_t>> gap_at_zero(Worker& w) {
    w.submit(0, twelve_in, twelve_out, out);
    auto frags = sent();
    EXPECT_EQ(frags.size(), 8u);
    for (int i = 1; i <= 3; ++i) w.on_packet(2 * kMillisecond, result_for(frags[i], 8), out);
    return frags;
  }
  static std::vector<std::vector<std::uint8_t>> resends(std::vector<std::vector<std::uint8_t>> v) {
    std::erase_if(v, [](const auto& p) { return !header_of(p).has(flag::kResend); });
    return v;
  }
  // The result for `fragment`, saying which of the 16 seqs before it had their result sent.
  std::vector<std::uint8_t> sent_behind(const std::vector<std::uint8_t>& fragment,
                                        std::uint16_t results_behind) {
    auto r = result_for(fragment, 8);
    proto::store_be16(r.data() + proto::offset::results_behind, results_behind);
    return r;
  }
  static std::size_t queries_of_zero(const std::vector<std::vector<std::uint8_t>>& v) {
    return std::count_if(v.begin(), v.end(), [](const auto& p) {
      return header_of(p).kind == proto::Kind::query && header_of(p).seq == 0;
    });
  }
  static std::size_t resends_of_zero(const std::vector<std::vector<std::uint8_t>>& v) {
    return std::count_if(v.begin(), v.end(), [](const auto& p) {
      return header_of(p).has(flag::kResend) && header_of(p).seq == 0;
    });
  }
  // A window of 8 from the start, a ring long enough to send past a hole, and timers far off.
  static WorkerConfig wide_config(WorkerConfig c) {
    c.initial_window = 8;
    c.ring = 16;
    c.min_rto = 50 * kMillisecond;
    return c;
  }
  std::vector<float> twelve_in = std::vector<float>(4 * 12, 1.0f),
                     twelve_out = std::vector<float>(4 * 12);
};

TEST_F(LossRecovery, AWorkerThatDoesNotLeadTheSeqWaitsForTheLeadThenAsksThenResends) {
  WorkerConfig c = wide_config(small_config());
  ASSERT_FALSE(c.rack == lead_rack(0, c.job_fan_in) &&
               c.rank_in_rack == lead_rank(0, c.job_fan_in, c.rack_fan_in));
  Worker w(c);
  const auto first = gap_at_zero(w);
  auto after_gap = sent();
  EXPECT_TRUE(resends(after_gap).empty());
  EXPECT_EQ(w.stats().deferred_gaps, 1u);
  // Out of the window while it waits: a fourth new fragment leaves in its place.
  ASSERT_EQ(after_gap.size(), 4u);
  EXPECT_EQ(header_of(after_gap.back()).seq, 11u);
  const Time fallback = 2 * kMillisecond + kLeadWaitRoundTrips * w.smoothed_rtt();
  EXPECT_EQ(*w.next_timer(), fallback);
  w.on_timer(fallback - 1, out);
  EXPECT_TRUE(sent().empty());
  // First the header alone: the result may only have been lost on its way down here.
  w.on_timer(fallback, out);
  auto asked = sent();
  ASSERT_EQ(asked.size(), 1u);
  const proto::Header q = header_of(asked[0]);
  EXPECT_EQ(q.kind, proto::Kind::query);
  EXPECT_EQ(q.value_count, 0u);
  EXPECT_EQ(asked[0].size(), proto::kHeaderBytes);
  EXPECT_EQ(q.next_level, proto::Level::parameter_server);  // no switch acts on it
  EXPECT_EQ(q.seq, 0u);
  EXPECT_EQ(q.tensor, header_of(first[0]).tensor);
  EXPECT_EQ(q.aggregator, header_of(first[0]).aggregator);
  EXPECT_EQ(w.stats().result_queries, 1u);
  EXPECT_EQ(w.stats().fallback_resends, 0u);
  // Nothing within another wait: the values go again.
  const Time resend_at = fallback + kLeadWaitRoundTrips * w.smoothed_rtt();
  w.on_timer(resend_at - 1, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);  // (the silence's probe resends the newest only)
  w.on_timer(resend_at, out);
  EXPECT_EQ(resends_of_zero(sent()), 1u);
  EXPECT_EQ(w.stats().fallback_resends, 1u);
  EXPECT_EQ(w.stats().result_queries, 1u);
  EXPECT_EQ(w.stats().fast_resends, 0u);
}

// A gap found before the first round-trip sample waits the initial RTO (the path unknown);
// the first sample cuts the wait to one recovery wait from then. Here the gap and the first
// sample come in one batch: the gap is found first, the sample taken at the batch's end.
TEST_F(LossRecovery, AWaitSetBeforeTheFirstRoundTripSampleEndsOneRecoveryWaitAfterIt) {
  WorkerConfig c = wide_config(small_config());
  c.initial_rto = 100 * kMillisecond;
  Worker w(c);
  w.submit(0, twelve_in, twelve_out, out);
  auto frags = sent();
  std::vector<std::vector<std::uint8_t>> results;
  for (int i = 1; i <= 3; ++i) results.push_back(result_for(frags[i], 8));
  std::vector<Arrival> arrivals;
  for (auto& r : results) arrivals.push_back({r, std::nullopt});
  w.on_packets(2 * kMillisecond, arrivals, out);
  sent();
  ASSERT_EQ(w.stats().deferred_gaps, 1u);
  ASSERT_EQ(w.smoothed_rtt(), 2 * kMillisecond);
  const Time fallback = 2 * kMillisecond + kLeadWaitRoundTrips * w.smoothed_rtt();
  EXPECT_EQ(*w.next_timer(), fallback);  // not 2 ms + the initial 100 ms
  w.on_timer(fallback, out);
  EXPECT_EQ(queries_of_zero(sent()), 1u);

  // The lead resends the gap at once, and checks its resend again two recovery waits after
  // the first sample, not two initial RTOs after the resend.
  c = leading(c, 0);
  Worker lead(c);
  lead.submit(0, twelve_in, twelve_out, out);
  frags = sent();
  results.clear();
  for (int i = 1; i <= 3; ++i) results.push_back(result_for(frags[i], 8));
  arrivals.clear();
  for (auto& r : results) arrivals.push_back({r, std::nullopt});
  lead.on_packets(2 * kMillisecond, arrivals, out);
  ASSERT_EQ(resends_of_zero(sent()), 1u);
  const Time recheck = 2 * kMillisecond + 2 * kLeadWaitRoundTrips * lead.smoothed_rtt();
  lead.on_timer(recheck - 1, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);  // (the silence's probe resends the newest only)
  lead.on_timer(recheck, out);
  EXPECT_EQ(resends_of_zero(sent()), 1u);
  EXPECT_EQ(lead.stats().fallback_resends, 1u);
}

TEST_F(LossRecovery, TheLeadResendsAtOnceAndAResultCancelsTheOthersFallback) {
  Worker lead(wide_config(leading(small_config(), 0)));
  gap_at_zero(lead);
  EXPECT_EQ(resends(sent()).size(), 1u);
  EXPECT_EQ(lead.stats().fast_resends, 1u);

  Worker other(wide_config(small_config()));
  auto frags = gap_at_zero(other);
  sent();
  other.on_packet(3 * kMillisecond, result_for(frags[0], 8), out);  // the lead's recovery
  other.on_timer(20 * kMillisecond, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);
  EXPECT_EQ(other.stats().fallback_resends, 0u);
}

TEST_F(LossRecovery, ARequestNamingThisWorkerResendsAtOnceAndOthersAreIgnored) {
  WorkerConfig c = wide_config(small_config());
  Worker w(c);
  auto frags = gap_at_zero(w);
  sent();
  const std::uint32_t me = 1u << c.rank_in_rack;
  w.on_packet(3 * kMillisecond, request_for(frags[0], c.rack, 0b1111 & ~me), out);
  w.on_packet(3 * kMillisecond, request_for(frags[0], c.rack ^ 1, me), out);  // other rack
  EXPECT_TRUE(sent().empty());
  // Others are asked: the lead's recovery is under way, so the fallback waits two round trips
  // from the request, not from the gap.
  w.on_timer(2 * kMillisecond + kLeadWaitRoundTrips * 2 * kMillisecond, out);
  w.on_timer(3 * kMillisecond + kLeadWaitRoundTrips * 2 * kMillisecond - 1, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);  // (the silence's probe resends the newest only)
  w.on_packet(3 * kMillisecond, request_for(frags[0], c.rack, me), out);
  auto resent = sent();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(header_of(resent[0]).seq, 0u);
  EXPECT_TRUE(header_of(resent[0]).has(flag::kResend));
  EXPECT_FALSE(header_of(resent[0]).has(flag::kFloatPayload));  // as sent: not a float request
  EXPECT_EQ(w.stats().requested_resends, 1u);
  // The request took the fallback's place: no second resend when it would have fired.
  w.on_timer(3 * kMillisecond + kLeadWaitRoundTrips * 2 * kMillisecond, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);
  EXPECT_EQ(w.stats().fallback_resends, 0u);
}

// The seq's recovery hangs on the lead's one resend: if no result comes within two recovery
// waits, it is resent again, long before the timer's floor.
TEST_F(LossRecovery, TheLeadsResendIsCheckedAgainBeforeTheTimer) {
  Worker lead(wide_config(leading(small_config(), 0)));
  gap_at_zero(lead);
  ASSERT_EQ(resends_of_zero(sent()), 1u);
  const Time recheck = 2 * kMillisecond + 2 * kLeadWaitRoundTrips * lead.smoothed_rtt();
  lead.on_timer(recheck - 1, out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);
  lead.on_timer(recheck, out);
  EXPECT_EQ(resends_of_zero(sent()), 1u);
  EXPECT_EQ(lead.stats().fallback_resends, 1u);
  EXPECT_EQ(lead.stats().timeouts, 0u);  // the timer's floor is 50 ms away
}

// A later result says the PS had sent seq 0's result: it was lost on its way down, and the
// values are in the sum. The lead asks for it with the header alone, at once, and asks again
// if nothing comes; it never resends the values (a resend would only meet the kept result).
TEST_F(LossRecovery, TheLeadAsksForAResultALaterResultShowsSentInsteadOfResendingIt) {
  Worker lead(wide_config(leading(small_config(), 0)));
  lead.submit(0, twelve_in, twelve_out, out);
  auto frags = sent();
  for (int i = 1; i <= 3; ++i)
    lead.on_packet(2 * kMillisecond, sent_behind(frags[i], 1u << (i - 1)), out);
  auto after_gap = sent();
  EXPECT_EQ(resends_of_zero(after_gap), 0u);
  ASSERT_EQ(queries_of_zero(after_gap), 1u);
  EXPECT_EQ(lead.stats().lost_down_queries, 1u);
  EXPECT_EQ(lead.stats().fast_resends, 0u);
  // Nothing within a wait: the query or its answer was lost. Asked again, still no values.
  const Time again = 2 * kMillisecond + kLeadWaitRoundTrips * lead.smoothed_rtt();
  lead.on_timer(again - 1, out);
  EXPECT_EQ(queries_of_zero(sent()), 0u);
  lead.on_timer(again, out);
  auto asked = sent();
  EXPECT_EQ(queries_of_zero(asked), 1u);
  EXPECT_EQ(resends_of_zero(asked), 0u);
  lead.on_timer(again + kLeadWaitRoundTrips * lead.smoothed_rtt(), out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);
  EXPECT_EQ(lead.stats().fallback_resends, 0u);
  EXPECT_EQ(lead.stats().result_queries, 3u);
  lead.on_packet(20 * kMillisecond, result_for(frags[0], 8), out);
  EXPECT_EQ(lead.stats().results, 4u);
}

// A worker that does not lead the seq leaves it to the lead even when a later result shows its
// result sent (the lead's query serves a rack that lost it on a shared link), but then asks,
// and asks again, rather than resend values the sum holds.
TEST_F(LossRecovery, AWorkerThatDoesNotLeadLeavesAFinishedSeqToTheLeadThenOnlyAsks) {
  WorkerConfig c = wide_config(small_config());
  Worker w(c);
  w.submit(0, twelve_in, twelve_out, out);
  auto frags = sent();
  w.on_packet(2 * kMillisecond, result_for(frags[1], 8), out);
  w.on_packet(2 * kMillisecond, result_for(frags[2], 8), out);
  w.on_packet(2 * kMillisecond, sent_behind(frags[3], 0b100), out);
  EXPECT_EQ(queries_of_zero(sent()), 0u);
  EXPECT_EQ(w.stats().deferred_gaps, 1u);
  const Time fallback = 2 * kMillisecond + kLeadWaitRoundTrips * w.smoothed_rtt();
  w.on_timer(fallback, out);
  EXPECT_EQ(queries_of_zero(sent()), 1u);
  w.on_timer(fallback + kLeadWaitRoundTrips * w.smoothed_rtt(), out);
  auto again = sent();
  EXPECT_EQ(queries_of_zero(again), 1u);
  EXPECT_EQ(resends_of_zero(again), 0u);
  EXPECT_EQ(w.stats().fallback_resends, 0u);
  EXPECT_EQ(w.stats().lost_down_queries, 0u);  // none asked at once
  // A bit for another seq says nothing of this one: after its query, seq 0's values go again.
  Worker other(c);
  other.submit(0, twelve_in, twelve_out, out);
  frags = sent();
  for (int i = 1; i <= 3; ++i)
    other.on_packet(2 * kMillisecond, sent_behind(frags[i], i == 3 ? 0b011 : 0), out);
  EXPECT_EQ(other.stats().deferred_gaps, 1u);
  const Time other_fallback = 2 * kMillisecond + kLeadWaitRoundTrips * other.smoothed_rtt();
  other.on_timer(other_fallback, out);
  EXPECT_EQ(queries_of_zero(sent()), 1u);
  other.on_timer(other_fallback + kLeadWaitRoundTrips * other.smoothed_rtt(), out);
  EXPECT_EQ(resends_of_zero(sent()), 1u);
  EXPECT_EQ(other.stats().fallback_resends, 1u);
}

// The lead's resend flushed the switches and the PS asks another worker for what it still
// lacks (a chain of requests on two racks): the lead waits for that recovery, out of the time
// rule's reach, instead of resending again before it can end.
TEST_F(LossRecovery, ARequestNamingOthersHoldsTheLeadsResendWhileTheRecoveryRuns) {
  WorkerConfig c = wide_config(leading(small_config(), 0));
  Worker lead(c);
  const auto frags = gap_at_zero(lead);
  const auto at_gap = sent();  // at 2 ms: the resend of 0, and fragments 8..10
  ASSERT_EQ(at_gap.size(), 4u);
  ASSERT_EQ(resends_of_zero(at_gap), 1u);
  const std::uint32_t me = 1u << c.rank_in_rack;
  lead.on_packet(3 * kMillisecond, request_for(frags[0], c.rack ^ 1, me), out);
  EXPECT_TRUE(sent().empty());
  for (int i = 4; i <= 7; ++i) lead.on_packet(5 * kMillisecond, result_for(frags[i], 8), out);
  for (const auto& p : at_gap)
    if (!header_of(p).has(flag::kResend)) lead.on_packet(5 * kMillisecond, result_for(p, 8), out);
  const auto fresh = sent();  // fragment 11, at 5 ms
  ASSERT_EQ(fresh.size(), 1u);
  // Fragment 11 left 3 ms after the resend of 0 and is answered: by the time rule 0 was lost
  // again, but the recovery the request shows is still under way.
  lead.on_packet(9 * kMillisecond, result_for(fresh[0], 8), out);
  EXPECT_EQ(resends_of_zero(sent()), 0u);
  EXPECT_EQ(lead.stats().fast_resends, 1u);
}

// Below its ceiling the congestion window has cut for queues: a gap left to the lead keeps its
// place in the window, and nothing new is sent past it.
TEST_F(LossRecovery, BelowTheCeilingADeferredGapKeepsItsPlaceInTheWindow) {
  WorkerConfig c = wide_config(small_config());
  c.initial_window = 6;  // the ceiling is 8
  Worker w(c);
  w.submit(0, twelve_in, twelve_out, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 6u);
  // The first answer is marked: the window halves to 3, and 0, 4 and 5 are still out.
  w.on_packet(2 * kMillisecond, result_for(frags[1], 8, flag::kEcn), out);
  for (int i = 2; i <= 3; ++i) w.on_packet(2 * kMillisecond, result_for(frags[i], 8), out);
  ASSERT_EQ(w.stats().deferred_gaps, 1u);
  ASSERT_LT(w.congestion_window(), 8.0);
  for (const auto& p : sent()) EXPECT_LT(header_of(p).seq, 6u);  // nothing new past the gap
}

// At the ceiling, half a window of deferred gaps at most leaves room for new fragments: a job
// the window bounds keeps sending while its holes are recovered, and one its links bound does
// not queue more than half a window of its own recovery behind them.
TEST_F(LossRecovery, AtTheCeilingHalfAWindowOfGapsLeavesRoomAtMost) {
  Worker w(wide_config(small_config()));  // window 8: room for 4
  std::vector<float> in(4 * 16, 1.0f), res(4 * 16);
  w.submit(0, in, res, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 8u);
  for (int i = 5; i <= 7; ++i) w.on_packet(2 * kMillisecond, result_for(frags[i], 8), out);
  ASSERT_EQ(w.stats().deferred_gaps, 5u);  // 0 to 4, none of which this worker leads
  std::uint32_t newest = 0;
  for (const auto& p : sent()) newest = std::max(newest, header_of(p).seq);
  EXPECT_EQ(newest, 7u + 3u + 4u);  // three answered, four of the five gaps
}

// A resend's answer needs no wait for the job's slowest worker, so it comes back faster than
// fragments sent before it. That they are still unanswered then is no sign of their loss.
TEST_F(LossRecovery, AResendsQuickAnswerRevealsNoLossAmongOlderFragments) {
  Worker lead(wide_config(leading(small_config(), 0)));
  auto frags = gap_at_zero(lead);
  ASSERT_EQ(resends(sent()).size(), 1u);  // 0, at 2 ms; 4 and 5 (sent at 0) still out
  lead.on_packet(2 * kMillisecond + 200 * kMicrosecond, result_for(frags[0], 8), out);
  EXPECT_TRUE(resends(sent()).empty());
  EXPECT_EQ(retransmissions(lead.stats()), 1u);
}

// Nor is it for fragments whose own answers take longer than the least round trip (each waits
// for the job's slowest worker): a resend's answer times only other resends. Timed against
// fresh fragments, each quick answer made the next fragments look lost, whose resends' quick
// answers did the same in turn (on two racks at 0.1 % loss, K = 256: 6 to 11 resends per lost
// packet, nearly all meeting a result the PS already had).
TEST_F(LossRecovery, AResendsQuickAnswerTimesNoFreshFragment) {
  Worker lead(wide_config(leading(small_config(), 0)));
  lead.submit(0, twelve_in, twelve_out, out);
  auto frags = sent();
  ASSERT_EQ(frags.size(), 8u);
  lead.on_packet(100 * kMicrosecond, result_for(frags[1], 8), out);  // the least round trip
  for (int i = 2; i <= 4; ++i) lead.on_packet(2 * kMillisecond, result_for(frags[i], 8), out);
  ASSERT_EQ(resends_of_zero(sent()), 1u);  // 0 overtaken: the lead resends it at 2 ms
  ASSERT_EQ(lead.stats().deferred_gaps, 0u);
  // 5, 6 and 7 (sent at 0) are older than a least round trip and the reordering window when
  // the resend's answer comes back, but as old as answers have been taking.
  lead.on_packet(2500 * kMicrosecond, result_for(frags[0], 8), out);
  EXPECT_TRUE(resends(sent()).empty());
  EXPECT_EQ(lead.stats().deferred_gaps, 0u);
  EXPECT_EQ(retransmissions(lead.stats()), 1u);
}

// The least round trip is recent: a queue that builds up raises it within two buckets of
// samples, or waits measured in it (a deferred gap's, the probe's) would run out before any
// answer could come, and every worker would resend (120 resends per lost packet on two racks
// near line rate with an all-time minimum).
TEST(RttEstimatorTest, TheLeastRoundTripFollowsAQueueThatBuildsUp) {
  RttEstimator rtt(10 * kMillisecond, 1 * kMillisecond, 80 * kMillisecond);
  rtt.sample(10 * kMicrosecond);
  for (unsigned i = 0; i < RttEstimator::kMinRttSamples; ++i) rtt.sample(30 * kMicrosecond);
  EXPECT_EQ(rtt.min_rtt(), 10 * kMicrosecond);  // still within the window
  for (unsigned i = 0; i < RttEstimator::kMinRttSamples; ++i) rtt.sample(30 * kMicrosecond);
  EXPECT_EQ(rtt.min_rtt(), 30 * kMicrosecond);
  rtt.sample(20 * kMicrosecond);  // a shorter one counts at once
  EXPECT_EQ(rtt.min_rtt(), 20 * kMicrosecond);
}

// A steady round trip (a window standing in the worker's own queues) leaves rttvar near zero:
// the timer still keeps min_rto above srtt, so a queue that grows by less than that fires
// nothing.
TEST(RttEstimatorTest, TheTimerKeepsAMarginAboveASteadyRoundTrip) {
  RttEstimator rtt(800 * kMicrosecond, 200 * kMicrosecond, 12800 * kMicrosecond);
  for (int i = 0; i < 200; ++i) rtt.sample(198 * kMicrosecond);
  EXPECT_EQ(rtt.srtt(), 198 * kMicrosecond);
  EXPECT_GE(rtt.rto(), (198 + 200) * kMicrosecond);
  // Short round trips keep the floor itself, as before.
  RttEstimator fast(800 * kMicrosecond, 200 * kMicrosecond, 12800 * kMicrosecond);
  for (int i = 0; i < 200; ++i) fast.sample(12 * kMicrosecond);
  EXPECT_LE(fast.rto(), 213 * kMicrosecond);
}

}  // namespace
}  // namespace atp::engines
