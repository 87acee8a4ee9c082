// gloo_allreduce: the ring-allreduce baseline of `atp cluster bench`. One process per worker of
// a job, as `atp worker` is for ATP: Gloo's ring allreduce over TCP, rendezvous through a
// folder every worker sees (Gloo's FileStore), the same report fields as `atp worker --json-out`.
// Values are small integers, so the float sum is exact in any order and checkable.
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

namespace {

float value(int rank, std::size_t i, std::uint32_t iteration) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3 + iteration) % 13) - 6);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Gloo ring allreduce over TCP: the baseline atp cluster bench runs"};
  int rank = 0, size = 2;
  std::string store_dir, prefix = "job", host = "127.0.0.1", json_out;
  std::size_t floats = 1 << 20;
  std::uint32_t iterations = 3, job = 1;
  app.add_option("--rank", rank, "This worker's rank")->required();
  app.add_option("--size", size, "Workers in the job")->required()->check(CLI::Range(1, 4096));
  app.add_option("--store", store_dir, "Rendezvous folder shared by the job's workers")->required();
  app.add_option("--prefix", prefix, "Rendezvous key prefix (one per job and run)");
  app.add_option("--host", host, "Address to listen on (this worker's host)");
  app.add_option("--floats", floats, "Floats per allreduce")->capture_default_str();
  app.add_option("--iterations", iterations, "Allreduces")->capture_default_str();
  app.add_option("--job", job, "Job id (for the report)");
  app.add_option("--json-out", json_out, "Write the report here");
  CLI11_PARSE(app, argc, argv);
  if (rank < 0 || rank >= size) {
    std::cerr << "gloo_allreduce: rank must be in [0, size)\n";
    return 2;
  }

  gloo::transport::tcp::attr attr;
  attr.hostname = host;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore files(store_dir);
  gloo::rendezvous::PrefixStore store(prefix, files);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  std::vector<float> data(floats);
  std::uint64_t mismatches = 0;
  double communication = 0;
  // The bandwidth-optimal ring (reduce-scatter, then allgather), what "ring allreduce" means.
  gloo::AllreduceRingChunked<float> ring(context, {data.data()}, static_cast<int>(floats));
  gloo::BarrierAllToAll barrier(context);
  for (std::uint32_t it = 0; it < iterations; ++it) {
    for (std::size_t i = 0; i < floats; ++i) data[i] = value(rank, i, it);
    barrier.run();  // as `atp worker`: time the collective from when every worker is ready
    const auto start = std::chrono::steady_clock::now();
    ring.run();
    communication += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::size_t i = 0; i < floats; ++i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) expected += value(r, i, it);
      if (data[i] != expected) {
        ++mismatches;
        break;
      }
    }
  }
  // Nobody hangs up while a peer still reads its last ring step (Gloo aborts on that).
  barrier.run();
  const double bytes = 4.0 * floats * iterations;
  const nlohmann::json report = {
      {"system", "gloo"}, {"job", job}, {"rank", rank}, {"finished", true},
      {"exact", mismatches == 0}, {"mismatches", mismatches}, {"iterations", iterations},
      {"tensor_bytes", bytes}, {"communication_s", communication},
      {"throughput_gbps", communication > 0 ? bytes * 8 / communication / 1e9 : 0.0}};
  if (!json_out.empty()) std::ofstream(json_out) << report.dump() << "\n";
  std::cout << report.dump() << "\n";
  return mismatches == 0 ? 0 : 1;
}
