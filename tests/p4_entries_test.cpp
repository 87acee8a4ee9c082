// What `atp p4 config` installs on a P4 switch of a cluster file: the software switch's entries
// with node ids replaced by the switch's ports, and the next hop's addresses per (job, port).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "control/p4_entries.h"

namespace atp::control {
namespace {

using ::testing::HasSubstr;

// One rack switch on ATP's port, two workers of job 1 behind ports 3 and 4, the PS behind 7.
std::string one_rack(const std::string& switch_extra, const std::string& second_worker =
                                                          "10.0.0.12:9200") {
  return R"(
[[switch]]
name = "rack0"
address = "10.0.0.1:9999"
level = 1
aggregators = 64
values_per_aggregator = 32
)" + switch_extra + R"(
[[ps]]
name = "ps1"
address = "10.0.1.10:9100"

[[job]]
id = 1
token = 7
window = 8
values_per_packet = 32
parameter_servers = ["ps1"]
workers = [ { rack = "rack0", address = "10.0.0.11:9200" },
            { rack = "rack0", address = ")" + second_worker + R"(" } ]
)";
}

const std::string kWiring = R"(mac = "02:00:00:00:00:01"
ports = [ { port = 3, peer = "10.0.0.11", mac = "02:00:00:00:00:0b" },
          { port = 4, peer = "10.0.0.12", mac = "02:00:00:00:00:0c" },
          { port = 7, peer = "10.0.1.10", mac = "02:00:00:00:01:0a" } ]
)";

bool has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(P4Entries, NodesBecomeTheWiredPortsAndEachGetsItsAddress) {
  const auto lines = bmv2_commands(p4_switch(ClusterConfig::parse(one_rack(kWiring)), "rack0"));
  // Members by port and the rank each speaks for alone (a slot each), the route up to the PS's
  // port, the multicast group over the workers.
  EXPECT_TRUE(has(lines, "table_add AtpIngress.job_table.members AtpIngress.job_table.member 1 3 0 0 => 1"));
  EXPECT_TRUE(has(lines, "table_add AtpIngress.job_table.members AtpIngress.job_table.member 1 4 0 1 => 2"));
  EXPECT_TRUE(has(lines, "table_add AtpIngress.job_table.members AtpIngress.job_table.member 1 7 1 0 => 0"));
  EXPECT_TRUE(has(lines, "table_add AtpIngress.job_table.routes_up AtpIngress.job_table.up 1 0&&&0 => 7 1"));
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) {
                            return l.starts_with("mc_node_create ") && l.ends_with(" 3 4");
                          }),
            1);
  // What leaves by port 4 for job 1 goes to the second worker, from the switch's address.
  EXPECT_TRUE(has(lines, "table_add AtpEgress.next_hop.next_hop AtpEgress.next_hop.rewrite 1 4 => "
                         "02:00:00:00:00:01 02:00:00:00:00:0c 10.0.0.1 10.0.0.12 9200"));
  EXPECT_TRUE(has(lines, "table_add AtpEgress.next_hop.next_hop AtpEgress.next_hop.rewrite 1 7 => "
                         "02:00:00:00:00:01 02:00:00:00:01:0a 10.0.0.1 10.0.1.10 9100"));
  EXPECT_TRUE(has(lines, "table_add AtpIngress.ipv4_routes AtpIngress.ipv4_forward 10.0.1.10/32 => "
                         "7 02:00:00:00:01:0a"));
}

TEST(P4Entries, RefusesWhatAP4SwitchCannotBe) {
  auto refusal = [](const std::string& text) {
    try {
      p4_switch(ClusterConfig::parse(text), "rack0");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal(one_rack("")), HasSubstr("needs `mac` and `ports`"));
  std::string not_atp_port = one_rack(kWiring);
  not_atp_port.replace(not_atp_port.find("10.0.0.1:9999"), 13, "10.0.0.1:9000");
  EXPECT_THAT(refusal(not_atp_port), HasSubstr("UDP port 9999"));
  std::string unwired = one_rack(kWiring);
  unwired.replace(unwired.find("peer = \"10.0.1.10\""), 18, "peer = \"10.0.1.99\"");
  EXPECT_THAT(refusal(unwired), HasSubstr("no port in `ports` leads to 10.0.1.10:9100"));
  // Two workers of one job on one host: the next hop could address only one of them.
  EXPECT_THAT(refusal(one_rack(kWiring, "10.0.0.11:9201")), HasSubstr("two nodes behind port 3"));
}

// Packets with more values than a pass holds go round through the recirculation port (509 on
// BMv2, port 68 of each pipe on Tofino): a member behind it would get them, and the packets
// sent to it would go round instead of out.
TEST(P4Entries, NoMemberMayBeBehindTheRecirculationPort) {
  auto wired_at = [](const std::string& port) {
    std::string text = one_rack(kWiring);
    text.replace(text.find("port = 4,"), 9, "port = " + port + ",");
    return ClusterConfig::parse(text);
  };
  EXPECT_NO_THROW(p4_switch(wired_at("196"), "rack0"));  // 68 of pipe 1: BMv2 has none
  EXPECT_THAT([&] { p4_switch(wired_at("509"), "rack0"); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("port 509 is where")));
  P4Limits tofino = P4Limits::tofino();
  tofino.values = 32;  // this file's K: only the ports are in question here
  EXPECT_NO_THROW(p4_switch(wired_at("509"), "rack0", tofino));
  EXPECT_THAT([&] { p4_switch(wired_at("196"), "rack0", tofino); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("port 196 is where")));
}

// On a Tofino, front-panel ports in loopback mode share the passes with each pipe's port 68:
// both parsers know them (ingress: what comes in is a later pass; egress: what goes out is not
// Ethernet), and each pipe spreads its aggregators over its ports for passes in turn by the
// index's low bits, one port per aggregator (its passes stay in order).
TEST(P4Entries, LoopbackPortsShareTheirPipesPassesAggregatorByAggregator) {
  P4Limits tofino = P4Limits::tofino();
  tofino.values = 32;  // this file's K
  const auto config = ClusterConfig::parse(one_rack(kWiring + "loopback_ports = [160, 168, 300]\n"));
  const std::string script = bfrt_python_script(p4_switch_base(config, "rack0", tofino));
  for (const char* parser : {"AtpIngressParser", "AtpEgressParser"})
    for (int port : {160, 168, 300})
      EXPECT_THAT(script, HasSubstr(fmt::format("p4.{}.loopback_ports.add(f1={}, f1_mask=0x1ff)\n",
                                                parser, port)));
  // Pipe 1 (ports 128-255): its port 68 (196), then 160 and 168, in turn over the buckets, so
  // each takes 42 or 43 of the 128.
  const int pipe1[] = {196, 160, 168};
  for (std::uint32_t bucket = 0; bucket < kRoundBuckets; ++bucket)
    EXPECT_THAT(script, HasSubstr(fmt::format(
                            "p4.AtpIngress.round_ports.add_with_round_via(pipe=1, bucket={}, "
                            "port={})\n", bucket, pipe1[bucket % 3])));
  EXPECT_THAT(script, HasSubstr("round_via(pipe=2, bucket=1, port=300)\n"));
  EXPECT_THAT(script, HasSubstr("round_via(pipe=2, bucket=2, port=324)\n"));
  // Pipe 0 has none: its packets take the table's default, port 68.
  EXPECT_THAT(script, ::testing::Not(HasSubstr("round_via(pipe=0")));
  EXPECT_EQ(p4_switch_base(ClusterConfig::parse(one_rack(kWiring)), "rack0", tofino).tables.size(),
            p4_switch_base(config, "rack0", tofino).tables.size() - 2 * 3 - 2 * kRoundBuckets);

  auto refusal = [&](const std::string& loopback, const P4Limits& limits) {
    try {
      p4_switch_base(ClusterConfig::parse(one_rack(kWiring + "loopback_ports = " + loopback + "\n")),
                     "rack0", limits);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal("[160]", P4Limits::bmv2()), HasSubstr("loopback ports are for Tofino"));
  EXPECT_THAT(refusal("[196]", tofino), HasSubstr("196 is its pipe's recirculation port"));
  EXPECT_THAT(refusal("[192]", tofino), HasSubstr("192 is an internal port of pipe 1"));
  EXPECT_THAT(refusal("[600]", tofino), HasSubstr("600 is beyond the target's 512 ports"));
  std::string many = "[";
  for (int p = 0; p < 65; ++p) many += std::to_string(256 + p) + ",";
  EXPECT_THAT(refusal(many + "]", tofino), HasSubstr("at most 64, not 65"));
}

TEST(P4Entries, TheWiringIsCheckedWhenTheFileIsRead) {
  auto refusal = [](const std::string& wiring) {
    try {
      ClusterConfig::parse(one_rack(wiring));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(refusal("mac = \"02:00:00:00:00:01\"\n"), HasSubstr("both `mac` and `ports`"));
  EXPECT_THAT(refusal("mac = \"02:00:00:00:00\"\nports = []\n"), HasSubstr("not a MAC address"));
  EXPECT_THAT(refusal("mac = \"02:00:00:00:00:01\"\nports = [ { port = 1, peer = \"10.0.0.300\", "
                      "mac = \"02:00:00:00:00:02\" } ]\n"),
              HasSubstr("not an IPv4 address"));
  EXPECT_THAT(refusal("mac = \"02:00:00:00:00:01\"\nports = [ "
                      "{ port = 1, peer = \"10.0.0.2\", mac = \"02:00:00:00:00:02\" }, "
                      "{ port = 1, peer = \"10.0.0.3\", mac = \"02:00:00:00:00:03\" } ]\n"),
              HasSubstr("port 1 is listed twice"));
  EXPECT_THAT(refusal("mac = \"02:00:00:00:00:01\"\nports = [ "
                      "{ port = 1, peer = \"10.0.0.2\", mac = \"02:00:00:00:00:02\" }, "
                      "{ port = 2, peer = \"10.0.0.2\", mac = \"02:00:00:00:00:03\" } ]\n"),
              HasSubstr("behind two ports"));
  EXPECT_THAT(refusal(kWiring + "loopback_ports = [8, 4]\n"),
              HasSubstr("port 4 leads to a neighbour, so it cannot loop back"));
  EXPECT_THAT(refusal(kWiring + "loopback_ports = [8, 8]\n"), HasSubstr("loopback port 8 is listed twice"));
  EXPECT_THAT(refusal(kWiring + "loopback_ports = 8\n"), HasSubstr("a list of port numbers"));
  EXPECT_THAT(refusal(kWiring + "loopback_ports = [\"8\"]\n"), HasSubstr("a list of port numbers"));
  EXPECT_THAT(refusal("loopback_ports = [8]\n"), HasSubstr("it needs `mac` and `ports` too"));
}

}  // namespace
}  // namespace atp::control
