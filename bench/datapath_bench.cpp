// Daemon datapaths in packets per second on loopback, next to a bare UDP forwarder with the
// same batching (recvmmsg/sendmmsg of 64), measured in the same run, alternating, so the ratio
// is fair on a noisy machine. A sender thread blasts a steady stream at one socket; outputs go
// to a sink socket that nobody reads (the kernel drops them), so only the measured side counts.
//   switch: per seq, two workers' fragments (the second completes the sum, which goes up) and
//           the PS's result (which frees the aggregator and fans out to both workers);
//   ps:     complete rack sums for ever-new seqs: each completes an entry and sends a result.
//
//   build/bin/datapath_bench [seconds-per-round] [K]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engines/ps/parameter_server.h"
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
// `renumber`: give every packet sent a new seq (the PS must see fresh fragments).
template <typename Forward>
Round measure(runtime::UdpSocket& target, std::vector<std::vector<std::uint8_t>> mix,
              bool renumber, double seconds, Forward forward) {
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    runtime::UdpSocket out(*runtime::Endpoint::parse("127.0.0.1:0"));
    runtime::SendBatch batch;
    std::size_t i = 0;
    std::uint32_t seq = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (int n = 0; n < 64; ++n, i = (i + 1) % mix.size()) {
        if (renumber) proto::store_be32(mix[i].data() + 12, seq++);
        batch.add(target.local(), mix[i]);
      }
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
  sw.add_job({1, {0, 0}, {0}, 64, 0, 0, /*fan_in=*/2, 0, /*multicast_group=*/1});  // port 0: the sink
  engines::ParameterServer ps;
  ps.add_job({1, {2}, 64, k, 0});
  std::vector<std::vector<std::uint8_t>> rack_sums = {packet(0, 0, 0, k)};
  proto::store_be32(rack_sums[0].data() + 24, 1);  // racks_bitmap: rack 0 whole
  Outbox outbox;

  auto bare = [&](std::span<std::uint8_t> p, runtime::SendBatch& out) { out.add(sink_address, p); };
  auto through_switch = [&](std::span<std::uint8_t> p, runtime::SendBatch& out) {
    const engines::Verdict v = sw.process(p, 0, 0);
    if (v.action == engines::Verdict::Action::port) out.add(sink_address, p);
    if (v.action == engines::Verdict::Action::multicast)
      for (std::size_t i = 0; i < sw.multicast_ports(v.group).size(); ++i) out.add(sink_address, p);
  };
  auto through_ps = [&](std::span<std::uint8_t> p, runtime::SendBatch& out) {
    ps.on_packet(0, p, outbox);
    for (auto& d : outbox.packets()) out.add(sink_address, d.bytes);
    outbox.clear();
  };

  double forwarder = 0, switch_pps = 0, forwarder_ps = 0, ps_pps = 0;
  for (int round = 0; round < 2; ++round) {
    auto rate = [](const Round& r) { return r.packets / r.seconds / 2; };
    forwarder += rate(measure(target, mix, false, seconds, bare));
    switch_pps += rate(measure(target, mix, false, seconds, through_switch));
    forwarder_ps += rate(measure(target, rack_sums, true, seconds, bare));
    ps_pps += rate(measure(target, rack_sums, true, seconds, through_ps));
  }
  const auto* c = sw.job_counters(1);
  std::printf("K=%u, %.1f s per round, 2 rounds alternating, packets/s in\n", k, seconds);
  std::printf("switch: bare forwarder %10.0f  ATP switch %10.0f  ratio %.2f  (completed %llu)\n",
              forwarder, switch_pps, switch_pps / forwarder,
              static_cast<unsigned long long>(c->completed));
  std::printf("ps:     bare forwarder %10.0f  ATP PS     %10.0f  ratio %.2f  (completed %llu)\n",
              forwarder_ps, ps_pps, ps_pps / forwarder_ps,
              static_cast<unsigned long long>(ps.job_counters(1)->completed));
  return 0;
}
