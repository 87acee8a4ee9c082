// A member counts as holding its address, for results and float requests, only once a packet
// of that job, with its token and its own rank, came from it (issue 49 item 1). Before,
// "heard" was any datagram from the address, for every job. That a member port names only its
// own rank is a switch rule, traced and replayed on BMv2 (switch_pipeline_test.cpp).
#include <gtest/gtest.h>

#include "engines/switch/switch_pipeline.h"
#include "packet_builder.h"

namespace atp::engines {
namespace {

using atp::testing::make_packet;
using atp::testing::PacketSpec;

constexpr Port kUp = 100;
const std::vector<Port> kWorkers = {1, 2, 3};

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
