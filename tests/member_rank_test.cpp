// A member of a job speaks for itself alone (issue 49 item 1): a worker's port names only its
// own rank's bit, a rack switch's port only its own rack; and a member counts as holding its
// address, for results and float requests, only once such a packet of that job came from it.
// Before: any member port could claim any rank's bit (one port completed seqs and asked for
// results in everyone's name), and "heard" was any datagram from the address, for every job.
// These run on the pipeline directly, not through the traces the P4 conformance harness
// replays: the BMv2 and Tofino programs do not bind ranks yet (docs/reliability.md).
#include <gtest/gtest.h>

#include "engines/switch/switch_pipeline.h"
#include "packet_builder.h"

namespace atp::engines {
namespace {

using atp::testing::make_packet;
using atp::testing::PacketSpec;

constexpr Port kUp = 100;
const std::vector<Port> kWorkers = {1, 2, 3};
const std::vector<Port> kRacks = {11, 12};

SwitchPipeline pipeline_with_job(proto::Level level, const std::vector<Port>& members,
                                 std::uint32_t job_id = 1) {
  SwitchPipeline p({level, 16, 8, Policy::atp});
  SwitchJob job{job_id, members, {kUp}, 4};
  job.fan_in = static_cast<std::uint8_t>(members.size());
  job.multicast_group = multicast_group_of_job(job_id);
  p.add_job(job);
  return p;
}

PacketSpec from_worker(std::uint32_t bits, proto::Kind kind = proto::Kind::fragment) {
  PacketSpec s;
  s.kind = kind;
  s.workers = bits;
  s.rack_fan_in = 3;
  if (kind != proto::Kind::fragment) {
    s.values.clear();
    s.level = proto::Level::parameter_server;
  }
  return s;
}

TEST(MemberRank, AWorkerPortNamesOnlyItsOwnRank) {
  SwitchPipeline p = pipeline_with_job(proto::Level::rack, kWorkers);
  struct Case {
    const char* what;
    PacketSpec spec;
    std::uint8_t flags;
  };
  const Case forged[] = {{"another's fragment", from_worker(0b10), 0},
                         {"a resend naming several", from_worker(0b110), proto::flag::kResend},
                         {"another's query", from_worker(0b10, proto::Kind::query), 0},
                         {"another's join", from_worker(0b100, proto::Kind::join), 0}};
  std::uint64_t dropped = 0;
  for (const Case& c : forged) {
    PacketSpec spec = c.spec;
    spec.flags = c.flags;
    auto packet = make_packet(spec);
    EXPECT_EQ(p.process(packet, kWorkers[0], 0).action, Verdict::Action::drop) << c.what;
    EXPECT_EQ(p.job_counters(1)->forged, ++dropped) << c.what;
  }
  EXPECT_EQ(p.registers().in_use(), 0u);
  EXPECT_FALSE((*p.heard_members(multicast_group_of_job(1)))[0]) << "a forgery proved nothing";
  auto own = make_packet(from_worker(0b1));
  p.process(own, kWorkers[0], 0);
  EXPECT_EQ(p.registers().in_use(), 1u);  // aggregated
  EXPECT_TRUE((*p.heard_members(multicast_group_of_job(1)))[0]);
  EXPECT_EQ(p.job_counters(1)->forged, dropped);
}

TEST(MemberRank, ARackPortNamesOnlyItsOwnRack) {
  SwitchPipeline p = pipeline_with_job(proto::Level::spine, kRacks);
  PacketSpec whole;
  whole.level = proto::Level::spine;
  whole.job_fan_in = 2;
  whole.rack_fan_in = 3;
  whole.workers = 0;
  whole.racks = 0b10;  // rack 1's sum
  whole.rack = 1;
  PacketSpec part = whole;  // part of rack 1
  part.racks = 0;
  part.workers = 0b11;
  for (PacketSpec spec : {whole, part}) {
    auto packet = make_packet(spec);
    EXPECT_EQ(p.process(packet, kRacks[0], 0).action, Verdict::Action::drop);  // from rack 0
    auto again = make_packet(spec);
    p.process(again, kRacks[1], 0);  // aggregated (the whole rack) or passed up (the part)
  }
  EXPECT_EQ(p.registers().in_use(), 1u);
  EXPECT_EQ(p.job_counters(1)->forged, 2u);
  const std::vector<bool> heard = *p.heard_members(multicast_group_of_job(1));
  EXPECT_EQ(heard, (std::vector<bool>{false, true}));
}

// A member is heard for a job once that job's packet, with its token and its own rank, came
// from it; a datagram of another job from the same port, or with a wrong token, proves nothing.
TEST(MemberRank, AMemberIsHeardPerJobOnlyFromItsOwnPackets) {
  SwitchPipeline p({proto::Level::rack, 16, 8, Policy::atp});
  for (std::uint32_t id : {1u, 2u}) {
    SwitchJob job{id, id == 1 ? kWorkers : std::vector<Port>{kWorkers[1]}, {kUp}, 4};
    job.fan_in = static_cast<std::uint8_t>(job.downstream.size());
    job.token = 40 + id;
    job.multicast_group = multicast_group_of_job(id);
    p.add_job(job);
  }
  const std::vector<bool>& job1 = *p.heard_members(multicast_group_of_job(1));
  EXPECT_EQ(job1, (std::vector<bool>{false, false, false}));
  PacketSpec of_job2 = from_worker(0b1);  // worker 1 of job 1 is job 2's rank 0
  of_job2.job = 2;
  of_job2.rack_fan_in = 1;
  of_job2.token = 42;
  auto packet = make_packet(of_job2);
  p.process(packet, kWorkers[1], 0);
  EXPECT_EQ(*p.heard_members(multicast_group_of_job(2)), std::vector<bool>{true});
  EXPECT_EQ(job1, (std::vector<bool>{false, false, false}));
  PacketSpec wrong_token = from_worker(0b10);
  wrong_token.token = 42;
  auto forged = make_packet(wrong_token);
  p.process(forged, kWorkers[1], 0);
  EXPECT_EQ(job1, (std::vector<bool>{false, false, false}));
  PacketSpec own = from_worker(0b10);
  own.token = 41;
  auto real = make_packet(own);
  p.process(real, kWorkers[1], 0);
  EXPECT_EQ(job1, (std::vector<bool>{false, true, false}));
  EXPECT_EQ(p.heard_members(999), nullptr);
}

}  // namespace
}  // namespace atp::engines
