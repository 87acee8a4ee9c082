// The runtime's threaded parts together, for ThreadSanitizer (`make tsan`) as much as for
// correctness: a switch with two shard threads, a PS, two jobs whose workers each run a
// Communicator (an I/O thread per worker, plus the caller's), while the control plane reads
// the switch's stats and removes and re-admits a third job from yet another thread. (The PS
// daemon is single-threaded: its control requests run on its own loop.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"
#include "free_ports.h"
#include "libatp/communicator.h"
#include "workload/gradients.h"

namespace atp {
namespace {

using testing::free_port;
using testing::free_ports;
// Two consecutive free ports for the two-thread switch (it listens on port and port + 1).
std::uint16_t free_port_pair() { return free_ports(2); }

std::string job_entry(std::uint32_t id) {
  std::string s = "[[job]]\nid = " + std::to_string(id) +
                  "\nwindow = 16\ndeadline_ms = 20000\nparameter_servers = [\"ps\"]\nworkers = [\n";
  for (int w = 0; w < 2; ++w)
    s += "{ rack = \"rack0\", address = \"127.0.0.1:" + std::to_string(free_port()) + "\" },\n";
  return s + "]\n";
}

TEST(ThreadedRuntime, ShardThreadsCommunicatorsAndControlPlaneTogether) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("atp-threads-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << "[[switch]]\nname = \"rack0\"\naddress = \"127.0.0.1:" << free_port_pair()
                      << "\"\naggregators = 64\nthreads = 2\n[[ps]]\nname = \"ps\"\naddress = "
                      << "\"127.0.0.1:" << free_port() << "\"\n"
                      << job_entry(1) << job_entry(2) << job_entry(3);
  const auto cluster = control::ClusterConfig::load(path);
  std::filesystem::remove(path);

  runtime::EventLoop loop;
  daemons::SwitchDaemon sw(cluster, "rack0");
  daemons::PsDaemon ps(cluster, "ps");
  sw.attach(loop);
  ps.attach(loop);
  loop.on_wake([] {});
  std::thread network([&] { loop.run(); });

  constexpr std::size_t n = 20'000;
  auto gradients = [](std::uint32_t job, std::uint32_t rank) {
    std::vector<float> v(n);
    workload::GradientSource{3}.fill(job, rank, 0, 0, v);
    return v;
  };
  std::vector<std::vector<float>> out(4, std::vector<float>(n));
  std::vector<std::thread> workers;
  for (std::uint32_t job = 1; job <= 2; ++job)
    for (std::uint32_t rank = 0; rank < 2; ++rank)
      workers.emplace_back([&, job, rank] {
        auto comm = Communicator::from_cluster(cluster, job, rank);
        const auto in = gradients(job, rank);
        for (int round = 0; round < 3; ++round) {
          auto pending = comm->allreduce_async(in, out[(job - 1) * 2 + rank]);
          (void)comm->stats();  // read from this thread while the I/O thread writes
          pending.get();
        }
      });

  std::atomic<bool> done{false};
  std::thread control([&] {
    while (!done.load()) {
      sw.remove_job(3);
      (void)sw.stats();
      sw.admit(cluster, 3);
      EXPECT_EQ(3u, sw.job_ids().size());
    }
  });
  for (auto& w : workers) w.join();
  done = true;
  control.join();
  loop.stop();
  loop.wake();
  network.join();

  for (std::uint32_t job = 1; job <= 2; ++job) {
    runtime::AddressBook book;
    const auto config = cluster.worker_config(job, 0, book);
    workload::ExactSum sum(config.values_per_packet, config.scale, 2);
    sum.reset(n);
    sum.add(gradients(job, 0));
    sum.add(gradients(job, 1));
    std::vector<float> expected(n);
    sum.finish(expected);
    for (std::uint32_t rank = 0; rank < 2; ++rank)
      EXPECT_EQ(0, std::memcmp(out[(job - 1) * 2 + rank].data(), expected.data(), n * 4))
          << "job " << job << " rank " << rank;
  }
}

}  // namespace
}  // namespace atp
