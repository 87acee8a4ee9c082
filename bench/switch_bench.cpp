// Switch daemon packets per second on loopback, next to a bare UDP forwarder with the same
// batching (recvmmsg/sendmmsg of 64), measured in the same run, alternating, so the ratio is
// fair on a noisy machine. A sender thread blasts a steady mix at the switch socket: for each
// seq, two workers' fragments (the second completes the sum, which goes up) and the PS's result
// (which frees the aggregator and fans out to both workers). Outputs go to a sink socket that
// nobody reads (the kernel drops them), so only the forwarding side is measured.
//
//   build/bin/switch_bench [seconds-per-round] [K]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engines/switch/switch_pipeline.h"
#include "proto/byte_order.h"
#include "proto/header.h"
#include "runtime/udp_socket.h"

using namespace atp;

namespace {

std::vector<std::uint8_t> packet(std::uint32_t seq, std::uint8_t flags, std::uint32_t workers,
                                 std::uint16_t k) {
  proto::Header h;
  h.flags = flags;
  h.job = 1;
  h.seq = seq;
  h.aggregator = seq;  // a slot per seq in a window of 64
  h.workers_bitmap = workers;
  h.rack_fan_in = 2;
  h.value_count = k;
  std::vector<std::uint8_t> p(h.packet_bytes());
  proto::encode(h, p);
  for (std::size_t i = 0; i < k; ++i) proto::store_be_i32(p.data() + proto::kHeaderBytes + 4 * i, 1);
  return p;
}

struct Round {
  double seconds = 0;
  std::uint64_t packets = 0;
};

// Runs the sender against `target` while `forward` drains it for `seconds`.
template <typename Forward>
Round measure(runtime::UdpSocket& target, const std::vector<std::vector<std::uint8_t>>& mix,
              double seconds, Forward forward) {
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    runtime::UdpSocket out(*runtime::Endpoint::parse("127.0.0.1:0"));
    runtime::SendBatch batch;
    std::size_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int n = 0; n < 64; ++n, i = (i + 1) % mix.size()) batch.add(target.local(), mix[i]);
      out.send(batch);
    }
  });
  runtime::ReceiveBatch received(64, 65536);
  runtime::SendBatch to_send;
  Round r;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const std::size_t n = target.receive(received);
    for (std::size_t i = 0; i < n; ++i) forward(received.packet(i), to_send);
    if (to_send.size() > 0) target.send(to_send);
    r.packets += n;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  sender.join();
  // Drain what is left so the next round starts clean.
  while (target.receive(received) > 0) {
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const auto k = static_cast<std::uint16_t>(argc > 2 ? std::atoi(argv[2]) : 64);
  std::vector<std::vector<std::uint8_t>> mix;
  for (std::uint32_t seq = 0; seq < 64; ++seq) {
    mix.push_back(packet(seq, 0, 1, k));
    mix.push_back(packet(seq, 0, 2, k));
    mix.push_back(packet(seq, proto::flag::kResult, 0, k));
  }
  runtime::UdpSocket sink(*runtime::Endpoint::parse("127.0.0.1:0"));
  const runtime::Endpoint sink_address = sink.local();
  runtime::UdpSocket target(*runtime::Endpoint::parse("127.0.0.1:0"));

  engines::SwitchPipeline sw({proto::Level::rack, 1024, k, engines::Policy::atp});
  sw.add_job({1, {0, 0}, {0}, 64});  // every NodeId is the sink here

  double forwarder_pps = 0, switch_pps = 0;
  for (int round = 0; round < 2; ++round) {
    const Round bare = measure(target, mix, seconds, [&](std::span<std::uint8_t> p, runtime::SendBatch& out) {
      out.add(sink_address, p);
    });
    const Round atp_round = measure(target, mix, seconds, [&](std::span<std::uint8_t> p, runtime::SendBatch& out) {
      const engines::Forwarding f = sw.process(p);
      if (f.action == engines::Forwarding::Action::unicast) out.add(sink_address, p);
      if (f.action == engines::Forwarding::Action::multicast)
        for (std::size_t i = 0; i < f.group.size(); ++i) out.add(sink_address, p);
    });
    forwarder_pps += bare.packets / bare.seconds / 2;
    switch_pps += atp_round.packets / atp_round.seconds / 2;
  }
  const auto* c = sw.job_counters(1);
  std::printf("K=%u, %.1f s per round, 2 rounds alternating\n", k, seconds);
  std::printf("bare UDP forwarder : %10.0f packets/s in\n", forwarder_pps);
  std::printf("ATP switch pipeline: %10.0f packets/s in (aggregated %llu, completed %llu, results %llu)\n",
              switch_pps, static_cast<unsigned long long>(c->aggregated),
              static_cast<unsigned long long>(c->completed),
              static_cast<unsigned long long>(c->results_sent));
  std::printf("ratio switch / forwarder: %.2f\n", switch_pps / forwarder_pps);
  return 0;
}
