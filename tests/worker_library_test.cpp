// libatp end to end in one process: a switch and a PS daemon on loopback sockets, and workers
// calling the C++ Communicator and the C API from their own threads.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"
#include "free_ports.h"
#include "libatp/atp.h"
#include "libatp/communicator.h"
#include "proto/byte_order.h"
#include "quant/quantizer.h"
#include "workload/gradients.h"

extern "C" int atp_test_c_allreduce(const char* config, uint32_t job, uint32_t rank,
                                    const float* in, float* out, size_t n, char* error,
                                    size_t error_size);

namespace atp {
namespace {

using testing::free_port;

class WorkerLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("atp-lib-" + std::to_string(::getpid()) + ".toml");
    std::ofstream(path_) << "[[switch]]\nname = \"rack0\"\naddress = \"127.0.0.1:" << free_port()
                         << "\"\naggregators = 64\n[[ps]]\nname = \"ps\"\naddress = \"127.0.0.1:"
                         << free_port() << "\"\n[[job]]\nid = 5\nwindow = 16\ndeadline_ms = 5000\n"
                         << "parameter_servers = [\"ps\"]\nworkers = [\n"
                         << "{ rack = \"rack0\", address = \"127.0.0.1:" << free_port() << "\" },\n"
                         << "{ rack = \"rack0\", address = \"127.0.0.1:" << free_port() << "\" }]\n";
    cluster_ = std::make_unique<control::ClusterConfig>(control::ClusterConfig::load(path_));
    switch_ = std::make_unique<daemons::SwitchDaemon>(*cluster_, "rack0");
    ps_ = std::make_unique<daemons::PsDaemon>(*cluster_, "ps");
    switch_->attach(loop_);
    ps_->attach(loop_);
    loop_.on_wake([] {});
    network_ = std::thread([this] { loop_.run(); });
  }
  void TearDown() override {
    stop_network();
    std::filesystem::remove(path_);
  }
  // After this the daemons' state may be read from the test's thread.
  void stop_network() {
    if (!network_.joinable()) return;
    loop_.stop();
    loop_.wake();
    network_.join();
  }
  std::vector<float> gradients(std::uint32_t rank, std::size_t n) {
    std::vector<float> v(n);
    workload::GradientSource{9}.fill(5, rank, 0, 0, v);
    return v;
  }
  std::vector<float> exact(std::size_t n) {
    runtime::AddressBook book;
    const auto config = cluster_->worker_config(5, 0, book);
    workload::ExactSum sum(config.values_per_packet, config.scale, 2);
    sum.reset(n);
    sum.add(gradients(0, n));
    sum.add(gradients(1, n));
    std::vector<float> out(n);
    sum.finish(out);
    return out;
  }

  std::filesystem::path path_;
  std::unique_ptr<control::ClusterConfig> cluster_;
  runtime::EventLoop loop_;
  std::unique_ptr<daemons::SwitchDaemon> switch_;
  std::unique_ptr<daemons::PsDaemon> ps_;
  std::thread network_;
};

TEST_F(WorkerLibrary, CppCommunicatorsSumExactlyBlockingAndAsync) {
  const std::size_t n = 100'000;
  std::vector<std::vector<float>> out(2, std::vector<float>(n)), in = {gradients(0, n), gradients(1, n)};
  std::vector<std::thread> workers;
  for (std::uint32_t rank = 0; rank < 2; ++rank)
    workers.emplace_back([&, rank] {
      auto comm = Communicator::from_cluster(*cluster_, 5, rank);
      comm->allreduce(in[rank], out[rank]);
      // Several tensors in flight, and in place.
      std::vector<float> a = in[rank], b = in[rank];
      auto fa = comm->allreduce_async(a, a);
      auto fb = comm->allreduce_async(b, b);
      fa.get();
      fb.get();
      EXPECT_EQ(0, std::memcmp(a.data(), out[rank].data(), n * 4));
      EXPECT_EQ(0, std::memcmp(b.data(), out[rank].data(), n * 4));
    });
  for (auto& w : workers) w.join();
  const auto expected = exact(n);
  for (const auto& o : out) EXPECT_EQ(0, std::memcmp(o.data(), expected.data(), n * 4));
}

// A reduce-scatter through the real daemons: each rank gets its own shard's exact sum, and
// only that shard's values come down to it (a header for each seq of the other's shard).
TEST_F(WorkerLibrary, AReduceScatterBringsEachRankItsOwnShardAlone) {
  const std::size_t shard = 10'000, n = 2 * shard;
  std::vector<std::vector<float>> in = {gradients(0, n), gradients(1, n)};
  std::vector<std::vector<float>> out(2, std::vector<float>(shard, -1.0f));
  std::vector<engines::WorkerStats> stats(2);
  std::vector<std::thread> workers;
  for (std::uint32_t rank = 0; rank < 2; ++rank)
    workers.emplace_back([&, rank] {
      auto comm = Communicator::from_cluster(*cluster_, 5, rank);
      comm->reduce_scatter_async(quant::Precision::float32, in[rank].data(), out[rank].data(), shard)
          .get();
      // In place: the output is this rank's shard of the input.
      std::vector<float> again = in[rank];
      float* mine = again.data() + rank * shard;
      comm->reduce_scatter_async(quant::Precision::float32, again.data(), mine, shard).get();
      EXPECT_EQ(0, std::memcmp(mine, out[rank].data(), shard * 4));
      stats[rank] = comm->stats();
    });
  for (auto& w : workers) w.join();
  const auto expected = exact(n);
  runtime::AddressBook book;
  const std::size_t k = cluster_->worker_config(5, 0, book).values_per_packet;
  const std::size_t per_shard = (shard + k - 1) / k;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(0, std::memcmp(out[rank].data(), expected.data() + rank * shard, shard * 4)) << rank;
    EXPECT_EQ(stats[rank].results, 4 * per_shard);  // two calls of two shards
    EXPECT_EQ(stats[rank].done_copies, 2 * per_shard) << "only its own shard's values came down";
  }
}

// float16 and bfloat16 tensors go through the Communicator as themselves: quantized straight
// from their values, the sum rounded once into them, in place and with tails; a fragment holding
// an infinity travels as float32 and comes back as the halves' float32 sum rounded once.
TEST_F(WorkerLibrary, HalfPrecisionTensorsSumStraightFromTheirValues) {
  using quant::Precision;
  const std::size_t n = 1'000;  // not a multiple of K: a short last fragment
  runtime::AddressBook book;
  const auto config = cluster_->worker_config(5, 0, book);
  const std::size_t k = config.values_per_packet, infinite_at = k + 3;
  for (Precision precision : {Precision::float16, Precision::bfloat16}) {
    // Each rank's halves: its gradients rounded to the format (by way of the wire).
    std::vector<std::vector<std::uint16_t>> halves(2, std::vector<std::uint16_t>(n));
    std::vector<std::uint8_t> wire(4 * n);
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      quant::quantize_to_wire(gradients(rank, n).data(), n, config.scale, wire.data());
      quant::dequantize_from_wire(precision, wire.data(), n, config.scale, halves[rank].data());
    }
    const std::uint8_t infinity[4] = {0x7F, 0x80, 0, 0};
    quant::floats_from_wire(precision, infinity, 1, &halves[1][infinite_at]);
    // Expected: int32 sums of each rank's quantized values, and float32 sums in the fragment
    // with the infinity, each rounded once to the format.
    std::vector<std::int64_t> sum(n, 0);
    std::vector<float> float_sum(n, 0.0f);
    for (const auto& h : halves) {
      quant::quantize_to_wire(precision, h.data(), n, config.scale, quant::kAnyMagnitude, wire.data());
      for (std::size_t i = 0; i < n; ++i) sum[i] += proto::load_be_i32(&wire[4 * i]);
      quant::floats_to_wire(precision, h.data(), n, wire.data());
      for (std::size_t i = 0; i < n; ++i) float_sum[i] += std::bit_cast<float>(proto::load_be32(&wire[4 * i]));
    }
    std::vector<std::uint16_t> expected(n);
    for (std::size_t i = 0; i < n; ++i) {
      const bool as_floats = i / k == infinite_at / k;
      proto::store_be32(&wire[4 * i], as_floats ? std::bit_cast<std::uint32_t>(float_sum[i])
                                                : static_cast<std::uint32_t>(sum[i]));
      if (as_floats) quant::floats_from_wire(precision, &wire[4 * i], 1, &expected[i]);
      else quant::dequantize_from_wire(precision, &wire[4 * i], 1, config.scale, &expected[i]);
    }
    std::vector<std::thread> workers;
    for (std::uint32_t rank = 0; rank < 2; ++rank)
      workers.emplace_back([&, rank] {
        auto comm = Communicator::from_cluster(*cluster_, 5, rank);
        comm->allreduce_async(precision, halves[rank].data(), halves[rank].data(), n).get();
      });
    for (auto& w : workers) w.join();
    for (const auto& h : halves) EXPECT_EQ(h, expected) << quant::to_string(precision);
  }
}

// Launching a job again on the same daemons, with nothing but default arguments: the PS hands
// the new launch a new run, so the results its last launch left (the whole short tensor is
// still kept for late resends) are never the answer. Each launch's sum is exact.
TEST_F(WorkerLibrary, ARelaunchedJobGetsItsOwnSumsNotTheLastLaunchs) {
  const std::size_t n = 1000;  // 4 fragments: all still held by the PS after a launch
  std::set<std::uint16_t> runs;
  for (int launch = 0; launch < 3; ++launch) {
    std::optional<std::uint16_t> run_of_rank[2];
    std::vector<std::vector<float>> in(2), out(2, std::vector<float>(n));
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      in[rank] = gradients(rank, n);
      for (float& v : in[rank]) v *= static_cast<float>(launch + 1);
    }
    std::vector<std::thread> workers;
    for (std::uint32_t rank = 0; rank < 2; ++rank)
      workers.emplace_back([&, rank] {
        auto comm = Communicator::from_cluster(*cluster_, 5, rank);
        EXPECT_FALSE(comm->run().has_value());  // not before PS 0 answered
        comm->allreduce(in[rank], out[rank]);
        run_of_rank[rank] = comm->run();
      });
    for (auto& w : workers) w.join();
    ASSERT_TRUE(run_of_rank[0].has_value());
    EXPECT_EQ(run_of_rank[0], run_of_rank[1]);
    runs.insert(*run_of_rank[0]);
    runtime::AddressBook book;
    const auto config = cluster_->worker_config(5, 0, book);
    workload::ExactSum sum(config.values_per_packet, config.scale, 2);
    sum.reset(n);
    sum.add(in[0]);
    sum.add(in[1]);
    std::vector<float> expected(n);
    sum.finish(expected);
    for (const auto& o : out)
      EXPECT_EQ(0, std::memcmp(o.data(), expected.data(), n * 4)) << "launch " << launch;
  }
  EXPECT_EQ(runs.size(), 3u);  // each launch its own run
  stop_network();
  const auto stats = ps_->stats();
  EXPECT_EQ(stats["jobs"]["5"]["runs_started"], 2);
  EXPECT_GE(stats["jobs"]["5"]["joins"], 6);
}

TEST_F(WorkerLibrary, CApiSumsExactlyAndReportsErrors) {
  const std::size_t n = 5'000;
  std::vector<std::vector<float>> out(2, std::vector<float>(n)), in = {gradients(0, n), gradients(1, n)};
  std::vector<std::thread> workers;
  int rc[2] = {-2, -2};
  char error[2][256] = {};
  for (std::uint32_t rank = 0; rank < 2; ++rank)
    workers.emplace_back([&, rank] {
      rc[rank] = atp_test_c_allreduce(path_.c_str(), 5, rank, in[rank].data(), out[rank].data(),
                                      n, error[rank], sizeof error[rank]);
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(rc[0], 0) << error[0];
  EXPECT_EQ(rc[1], 0) << error[1];
  const auto expected = exact(n);
  EXPECT_EQ(0, std::memcmp(out[0].data(), expected.data(), n * 4));

  char message[256] = {};
  EXPECT_EQ(nullptr, atp_comm_open("/nonexistent/cluster.toml", 5, 0, message, sizeof message));
  EXPECT_NE(std::string(message).find("cannot read"), std::string::npos) << message;
  EXPECT_EQ(nullptr, atp_comm_open(path_.c_str(), 5, 7, message, sizeof message));
  EXPECT_NE(std::string(message).find("no rank 7"), std::string::npos) << message;
}

TEST_F(WorkerLibrary, AWorkerAloneFailsWithTheReasonAtTheDeadline) {
  // Its peer never comes: with the run handshake it never gets a run; with an explicit run
  // its fragments never get results. Either way it says so at the deadline.
  for (const auto& [run, reason] : {std::pair{std::optional<std::uint16_t>{}, "not every worker"},
                                    std::pair{std::optional<std::uint16_t>{3}, "no result"}}) {
    auto comm = Communicator::from_cluster(*cluster_, 5, 0, run);
    std::vector<float> in(1000, 1.0f), out(1000);
    try {
      comm->allreduce(in, out);
      ADD_FAILURE() << "completed without its peer";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
  }
}

TEST_F(WorkerLibrary, WorkersStartedFromDifferentFilesFailRatherThanSumWrongly) {
  // Rank 1 reads a copy of the file with another scale: summed with rank 0's integers its
  // values would be meaningless. Its packets carry another wire token, so they are dropped as
  // forged and both workers fail at the deadline instead: rank 0 with no result, rank 1 with no
  // answer to the claim of its run (forged too). (An explicit run, so that rank 0's fragments
  // flow: with the handshake they would already stop at rank 1's forged join.)
  std::stringstream text;
  text << std::ifstream(path_).rdbuf();
  const auto other = control::ClusterConfig::parse(text.str() + "scale = 1024.0\n");
  auto run = [](std::unique_ptr<Communicator> comm, std::string& error) {
    std::vector<float> in(1000, 0.5f), out(1000);
    try {
      comm->allreduce(in, out);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  };
  std::string error0, error1;
  std::thread peer(run, Communicator::from_cluster(other, 5, 1, 0), std::ref(error1));
  run(Communicator::from_cluster(*cluster_, 5, 0, 0), error0);
  peer.join();
  EXPECT_NE(error0.find("no result"), std::string::npos) << error0;
  EXPECT_NE(error1.find("no run id"), std::string::npos) << error1;
  EXPECT_GT(switch_->stats()["jobs"]["5"]["forged"].get<std::uint64_t>(), 0u);
}

}  // namespace
}  // namespace atp
