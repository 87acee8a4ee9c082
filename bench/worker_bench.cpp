// The worker engine's cost per byte, next to the least any worker must do: copy its gradient
// into packets and the result back out (memcpy both ways), measured in the same run. A loop
// plays the network: every fragment the worker sends comes straight back, in place, as its
// result.
//
//   build/bin/worker_bench [MiB] [K] [rounds]   (rounds: 3; more for a profile of the timed part)
//
// The engine's work is the processor's (a few hundred instructions per fragment), the copy's
// the memory's, so their ratio follows the clock, which this VM's host changes by as much as
// 1.9 to 3.6 GHz from one minute to the next: the bench prints it, before and after.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>

#include <CLI/CLI.hpp>

#include "engines/worker/worker.h"
#include "proto/header.h"

using namespace atp;

namespace {

// Datagrams per receive call, as libatp's communicator takes them (recvmmsg).
constexpr std::size_t kReceiveBatch = 64;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Sends every fragment of `input` and answers each with a result, until the allreduce is done.
// The loop plays a network that hands the worker its received datagrams in place, as recvmmsg
// does: each outgoing buffer is turned into its own result (the switch's sum of one worker is
// its own values) and delivered, kReceiveBatch at a time, while the worker's new sends fill
// the other outbox. The outboxes outlive the round, as a runtime's do: their buffers are
// allocated once.
double run_worker(std::vector<float>& input, std::vector<float>& output, std::uint16_t k,
                  Outbox (&outboxes)[2]) {
  engines::WorkerConfig c;
  c.values_per_packet = k;
  c.window = 256;
  c.scale = 1 << 20;
  engines::Worker worker(c);
  int sending = 0;
  outboxes[0].clear();
  engines::Arrival arrivals[kReceiveBatch];
  const auto start = std::chrono::steady_clock::now();
  worker.submit(0, input, output, outboxes[sending]);
  while (!outboxes[sending].empty()) {
    Outbox& arriving = outboxes[sending];
    sending ^= 1;
    outboxes[sending].clear();
    std::span<Datagram> packets = arriving.packets();
    while (!packets.empty()) {
      const std::size_t n = std::min(packets.size(), kReceiveBatch);
      for (std::size_t i = 0; i < n; ++i) {
        std::vector<std::uint8_t>& bytes = packets[i].bytes;
        bytes[1] = proto::flag::kResult;
        std::memset(bytes.data() + 20, 0, 8);  // no contributor bitmaps on a result
        arrivals[i] = {bytes, std::nullopt};
      }
      worker.on_packets(0, {arrivals, n}, outboxes[sending]);
      packets = packets.subspan(n);
    }
  }
  return seconds_since(start);
}

// The baseline: the same bytes into packet buffers and back, K values at a time.
double run_copy(const std::vector<float>& input, std::vector<float>& output, std::uint16_t k) {
  std::vector<std::uint8_t> packet(proto::kHeaderBytes + 4 * std::size_t{k});
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < input.size(); i += k) {
    const std::size_t n = std::min<std::size_t>(k, input.size() - i);
    std::memcpy(packet.data() + proto::kHeaderBytes, input.data() + i, 4 * n);
    std::memcpy(output.data() + i, packet.data() + proto::kHeaderBytes, 4 * n);
  }
  return seconds_since(start);
}

// The clock in GHz, from a chain of dependent adds (one per cycle on any x86-64 of the last
// decade) timed for about 0.1 s; 0 elsewhere.
double clock_ghz() {
#if defined(__x86_64__)
  constexpr long kAdds = 300'000'000;
  long x = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kAdds; ++i) asm volatile("add $1, %0" : "+r"(x));
  return kAdds / seconds_since(start) / 1e9;
#else
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The worker engine per byte next to copying the same bytes in and out"};
  std::size_t mib = 64;
  std::uint16_t k = 256;
  int rounds = 3;
  app.add_option("mib", mib, "Tensor size in MiB")
      ->capture_default_str()->check(CLI::Range(std::size_t{1}, std::size_t{16384}));
  app.add_option("k", k, "Values per fragment (K)")
      ->capture_default_str()->check(CLI::Range(std::uint16_t{1}, proto::kMaxValues));
  app.add_option("rounds", rounds, "Rounds of each, alternating; the best of each counts")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);

  const double clock_before = clock_ghz();
  std::vector<float> input(mib << 18), output(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 1000) / 1000;
  double worker = 1e9, copy = 1e9;
  Outbox outboxes[2];
  for (int round = 0; round < rounds; ++round) {  // best of N, alternating
    worker = std::min(worker, run_worker(input, output, k, outboxes));
    copy = std::min(copy, run_copy(input, output, k));
  }
  const double clock_after = clock_ghz();
  const double bytes = 4.0 * input.size();
  std::printf("%zu MiB, K=%u, best of %d alternating rounds\n", mib, k, rounds);
  std::printf("clock before / after: %.2f / %.2f GHz\n", clock_before, clock_after);
  std::printf("copy in and out : %6.2f GB/s\n", bytes / copy / 1e9);
  std::printf("worker engine   : %6.2f GB/s (quantize, send, loss tracking, dequantize)\n",
              bytes / worker / 1e9);
  std::printf("ratio worker / copy: %.2f\n", copy / worker);
  return 0;
}
