// The control plane derives every engine's view of a job from one cluster file.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "control/cluster_config.h"

namespace atp::control {
namespace {

std::string example(const char* name) {
  std::ifstream in(std::string(ATP_SOURCE_DIR) + "/examples/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ClusterConfig, TwoRacksDeriveFanInsGroupsAndRoutes) {
  const auto c = ClusterConfig::parse(example("two_racks.toml"));
  runtime::AddressBook book;
  const auto rack = c.switch_jobs("rackB", book);
  ASSERT_EQ(rack.size(), 1u);
  EXPECT_EQ(rack[0].fan_in, 2);
  ASSERT_EQ(rack[0].downstream.size(), 2u);
  EXPECT_EQ(book.endpoint(rack[0].downstream[0]).str(), "127.0.0.1:9203");
  ASSERT_EQ(rack[0].upstream.size(), 1u);
  EXPECT_EQ(book.endpoint(rack[0].upstream[0]).str(), "127.0.0.1:9110");

  const auto spine = c.switch_jobs("spine", book);
  ASSERT_EQ(spine.size(), 1u);
  EXPECT_EQ(spine[0].fan_in, 2);
  EXPECT_EQ(spine[0].upstream.size(), 2u);  // one per parameter server, by ps_index
  EXPECT_EQ(book.endpoint(spine[0].upstream[1]).str(), "127.0.0.1:9301");

  const auto ps = c.server_jobs("ps1", book);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].ps_index, 1);
  EXPECT_EQ(ps[0].workers_per_rack, (std::vector<std::uint8_t>{2, 2}));
  EXPECT_EQ(book.endpoint(ps[0].downstream).str(), "127.0.0.1:9110");

  const auto w = c.worker_config(7, 2, book);
  EXPECT_EQ(w.rack, 1);
  EXPECT_EQ(w.rank_in_rack, 0);
  EXPECT_EQ(w.rack_fan_in, 2);
  EXPECT_EQ(w.job_fan_in, 2);
  EXPECT_EQ(w.job_workers, 4);
  EXPECT_EQ(w.parameter_servers, 2);
  EXPECT_EQ(book.endpoint(w.uplink).str(), "127.0.0.1:9101");
}

TEST(ClusterConfig, OneRackSendsResultsThroughTheRackSwitchAndSlicesThePool) {
  const auto c = ClusterConfig::parse(example("one_rack.toml"));
  runtime::AddressBook book;
  const auto jobs = c.switch_jobs("rack0", book);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].static_first, 512u);
  EXPECT_EQ(jobs[1].static_count, 512u);
  EXPECT_EQ(book.endpoint(jobs[0].upstream[0]).str(), "127.0.0.1:9301");
  EXPECT_EQ(book.endpoint(c.server_jobs("ps2", book)[0].downstream).str(), "127.0.0.1:9100");
  EXPECT_GT(c.worker_config(1, 0, book).scale, 1.0f);
}

void expect_rejected(const std::string& text, const std::string& words) {
  try {
    ClusterConfig::parse(text, "test.toml");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

const char* kSwitch = "[[switch]]\nname = \"r\"\naddress = \"127.0.0.1:1\"\n";
const char* kPs = "[[ps]]\nname = \"p\"\naddress = \"127.0.0.1:2\"\n";

TEST(ClusterConfig, RejectsBadFilesWithTheReason) {
  expect_rejected("[[switch]]\nname = 3", "test.toml");
  expect_rejected("[[switch]]\nname = \"r\"\naddress = \"nowhere\"\n", "not an IPv4");
  expect_rejected(std::string(kSwitch) + kPs +
                      "[[job]]\nid = 1\nwindow = 3\nparameter_servers = [\"p\"]\n"
                      "workers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n",
                  "power of two");
  expect_rejected(std::string(kSwitch) + kPs +
                      "[[job]]\nid = 1\nparameter_servers = [\"p\"]\n"
                      "workers = [{ rack = \"x\", address = \"127.0.0.1:3\" }]\n",
                  "no switch named 'x'");
  expect_rejected(std::string(kSwitch) + kPs + "[[switch]]\nname = \"r2\"\naddress = \"127.0.0.1:4\"\n" +
                      "[[job]]\nid = 1\nparameter_servers = [\"p\"]\nworkers = [\n"
                      "{ rack = \"r\", address = \"127.0.0.1:3\" },\n"
                      "{ rack = \"r2\", address = \"127.0.0.1:5\" }]\n",
                  "level-2 uplink");
  expect_rejected(std::string(kSwitch) + kSwitch, "more than once");
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 1\nparameter_servers = [\"p\"]\n",
                  "missing workers");
  expect_rejected(std::string(kSwitch) + kPs +
                      "[[job]]\nid = 1\ncongestion_control = \"no\"\nparameter_servers = [\"p\"]\n"
                      "workers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n",
                  "congestion_control must be true or false");
  expect_rejected(std::string(kSwitch) + "ecn_backlog_bytes = -1\n", "must not be negative");
}

TEST(ClusterConfig, EcnSettingsReachTheSwitchAndTheWorkers) {
  const std::string job = std::string("[[job]]\nid = 1\nparameter_servers = [\"p\"]\n") +
                          "workers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n";
  runtime::AddressBook book;
  const auto defaults = ClusterConfig::parse(std::string(kSwitch) + kPs + job);
  EXPECT_EQ(defaults.switch_named("r").ecn_backlog_bytes, 128u << 10);
  EXPECT_EQ(defaults.switch_named("r").ecn_receive_backlog_bytes, 1u << 20);
  EXPECT_TRUE(defaults.worker_config(1, 0, book).congestion_control);
  EXPECT_EQ(defaults.worker_config(1, 0, book).initial_window, 16u);
  const auto set = ClusterConfig::parse(std::string(kSwitch) + "ecn_backlog_bytes = 0\necn_receive_backlog_bytes = 7\n" + kPs +
                                        job + "congestion_control = false\ninitial_window = 0\n");
  EXPECT_EQ(set.switch_named("r").ecn_backlog_bytes, 0u);
  EXPECT_EQ(set.switch_named("r").ecn_receive_backlog_bytes, 7u);
  EXPECT_FALSE(set.worker_config(1, 0, book).congestion_control);
  EXPECT_EQ(set.worker_config(1, 0, book).initial_window, 0u);
}

// A job's ring and lane placement reach its workers and its PS; bad values are refused.
TEST(ClusterConfig, RingAndPlacementReachTheWorkersAndThePs) {
  const std::string job = std::string("[[job]]\nid = 1\nparameter_servers = [\"p\"]\n") +
                          "workers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n";
  runtime::AddressBook book;
  const auto defaults = ClusterConfig::parse(std::string(kSwitch) + kPs + job);
  EXPECT_EQ(defaults.worker_config(1, 0, book).ring, 0u);  // 16 windows
  EXPECT_EQ(defaults.worker_config(1, 0, book).placement, engines::Placement::planned);
  const auto set = ClusterConfig::parse(std::string(kSwitch) + kPs + job +
                                        "ring = 256\nplacement = \"linear\"\n");
  EXPECT_EQ(set.worker_config(1, 0, book).ring, 256u);
  EXPECT_EQ(set.worker_config(1, 0, book).placement, engines::Placement::linear);
  EXPECT_EQ(set.server_jobs("p", book).at(0).ring, 256u);
  EXPECT_NE(set.wire_token(1), defaults.wire_token(1));  // the ring sizes the PS's memory
  EXPECT_THROW(ClusterConfig::parse(std::string(kSwitch) + "aggregators = 8281828\n" + kPs + job),
               std::invalid_argument);  // 8 GiB of registers (found by the config fuzzer)
  EXPECT_THROW(ClusterConfig::parse(std::string(kSwitch) + "aggregators = 1021027\n" + kPs + job),
               std::invalid_argument);  // just under 1 GiB: out of memory in the fuzzer
  EXPECT_NO_THROW(ClusterConfig::parse(std::string(kSwitch) + "aggregators = 262144\n" + kPs + job));
  for (const char* bad : {"ring = 32\n", "ring = 100\n", "placement = \"round-robin\"\n"})
    EXPECT_THROW(ClusterConfig::parse(std::string(kSwitch) + kPs + job + bad),
                 std::invalid_argument)
        << bad;
}

}  // namespace
}  // namespace atp::control

namespace atp::control {
namespace {

TEST(ClusterConfig, ThreadsDealJobsToPortsAndSplitThePool) {
  auto text = example("one_rack.toml");
  text.replace(text.find("policy = \"atp\""), 14, "policy = \"static\"\nthreads = 2");
  const auto c = ClusterConfig::parse(text);
  EXPECT_EQ(c.thread_of("rack0", 1), 1u);  // by job id: stable when other jobs change
  EXPECT_EQ(c.thread_of("rack0", 2), 0u);
  EXPECT_EQ(c.address_for("rack0", 1).str(), "127.0.0.1:9101");
  EXPECT_EQ(c.switch_config("rack0").pool_size, 512u);  // per thread
  runtime::AddressBook book;
  const auto jobs = c.switch_jobs("rack0", book);
  EXPECT_EQ(jobs[1].static_first, 0u);  // alone in its thread's pool
  EXPECT_EQ(jobs[1].static_count, 512u);
  EXPECT_EQ(book.endpoint(c.worker_config(1, 0, book).uplink).str(), "127.0.0.1:9101");
  EXPECT_EQ(book.endpoint(c.server_jobs("ps1", book)[0].downstream).str(), "127.0.0.1:9101");
  // Static slices ignore the aggregator a fragment names: the PS plans nothing.
  EXPECT_EQ(c.server_jobs("ps1", book)[0].pool_size, 0u);
}

}  // namespace
}  // namespace atp::control

namespace atp::control {
namespace {

TEST(ClusterConfig, RejectsNumbersBeyondTheirField) {
  expect_rejected(std::string(kSwitch) + "threads = 4294967297\n", "too large");
  expect_rejected(std::string(kSwitch) + kPs +
                      "[[job]]\nid = 1\ndeadline_ms = 99999999999\nparameter_servers = [\"p\"]\n"
                      "workers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n",
                  "deadline_ms");
}

}  // namespace
}  // namespace atp::control

namespace atp::control {
namespace {

TEST(ClusterConfig, WireTokenBindsEverythingTheJobsPartiesMustAgreeOn) {
  const std::string base = example("one_rack.toml");
  const auto token_with = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return ClusterConfig::parse(text).wire_token(1);
  };
  const ClusterConfig c = ClusterConfig::parse(base);
  const std::uint32_t token = c.wire_token(1);
  // Switch, PS and workers all carry the same one.
  runtime::AddressBook book;
  EXPECT_EQ(c.switch_jobs("rack0", book)[0].token, token);
  EXPECT_EQ(c.server_jobs("ps1", book)[0].token, token);
  EXPECT_EQ(c.worker_config(1, 2, book).token, token);
  EXPECT_NE(c.wire_token(2), token);

  // Anything that would make a sum wrong or stuck changes it (the first match is job 1's)...
  EXPECT_NE(token_with("max_gradient = 1.0", "max_gradient = 4.0"), token);  // the scale
  EXPECT_NE(token_with("values_per_packet = 256", "values_per_packet = 128"), token);
  EXPECT_NE(token_with("window = 64", "window = 32"), token);
  EXPECT_NE(token_with("token = 2718281828", "token = 7"), token);
  EXPECT_NE(token_with("127.0.0.1:9201", "127.0.0.1:9299"), token);  // a worker's address
  EXPECT_NE(token_with("parameter_servers = [\"ps1\"]", "parameter_servers = [\"ps2\"]"), token);
  // ...a local timeout does not.
  EXPECT_EQ(token_with("deadline_ms = 30000", "deadline_ms = 1000"), token);
}

TEST(ClusterConfig, SizesBeyondTheHeadersFieldsAreRejected) {
  std::string workers;
  for (int w = 0; w < 33; ++w) workers += "{ rack = \"r\", address = \"127.0.0.1:" + std::to_string(100 + w) + "\" },";
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 1\nparameter_servers = [\"p\"]\nworkers = [" +
                      workers + "]\n",
                  "32");
  const std::string one_worker =
      "\nparameter_servers = [\"p\"]\nworkers = [{ rack = \"r\", address = \"127.0.0.1:3\" }]\n";
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 4294967296" + one_worker, "too large");
  // The switches' owner tag keeps 15 bits of the job id.
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 32768" + one_worker, "0..32767");
  const auto c = ClusterConfig::parse(std::string(kSwitch) + kPs + "[[job]]\nid = 32767" + one_worker);
  EXPECT_EQ(c.jobs()[0].id, 32767u);
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 1\nvalues_per_packet = 1025" + one_worker,
                  "values_per_packet");
  // K beyond what the switch aggregates: every fragment would pass it unaggregated, as a job of
  // 64 did on a P4 switch of 14 without a word (issue 33). A switch that aggregates nothing
  // (policy "none") passes every fragment anyway.
  expect_rejected(std::string(kSwitch) + "values_per_aggregator = 14\n" + kPs +
                      "[[job]]\nid = 1\nvalues_per_packet = 64" + one_worker,
                  "values_per_packet 64 is more than switch 'r' aggregates (values_per_aggregator 14)");
  EXPECT_NO_THROW(ClusterConfig::parse(std::string(kSwitch) + "values_per_aggregator = 14\npolicy = \"none\"\n" +
                                       kPs + "[[job]]\nid = 1\nvalues_per_packet = 64" + one_worker));
  EXPECT_NO_THROW(ClusterConfig::parse(std::string(kSwitch) + "values_per_aggregator = 14\n" + kPs +
                                       "[[job]]\nid = 1\nvalues_per_packet = 14" + one_worker));
  // A one-rack job's sums pass its rack's uplink unaggregated: a narrower spine is no limit.
  const std::string spine = "[[switch]]\nname = \"s\"\naddress = \"127.0.0.1:4\"\nlevel = 2\n"
                            "values_per_aggregator = 14\n";
  EXPECT_NO_THROW(ClusterConfig::parse(spine + kSwitch + "uplink = \"s\"\n" + kPs +
                                       "[[job]]\nid = 1\nvalues_per_packet = 64" + one_worker));
  // Found by the config fuzzer: accepted by the file, then refused by the switch at start.
  expect_rejected(std::string(kSwitch) + "values_per_aggregator = 2256\n" + kPs, "values_per_aggregator");
  expect_rejected(std::string(kSwitch) + "passes = 3\n" + kPs, "passes must divide");
  // A float where an integer belongs is refused, not cast (2.7e84 overflowed int64: UB).
  expect_rejected(std::string(kSwitch) + kPs + "[[job]]\nid = 1\ntoken = 2718E81" + one_worker,
                  "must be an integer");
  expect_rejected(std::string(kSwitch) + "aggregators = 64.0\n" + kPs, "must be an integer");
}

}  // namespace
}  // namespace atp::control
