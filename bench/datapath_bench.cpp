// Daemon datapaths in packets per second on loopback, next to a bare UDP forwarder with the
// same batching (recvmmsg/sendmmsg of 64), measured in the same run, alternating, so the ratio
// is fair on a noisy machine. A sender thread blasts a steady stream at one socket; outputs go
// to a sink socket that nobody reads (the kernel drops them), so only the measured side counts.
//   switch: per seq, two workers' fragments (the second completes the sum, which goes up) and
//           the PS's result (which frees the aggregator and fans out to both workers);
//   ps:     complete rack sums for ever-new seqs: each completes an entry and sends a result.
// With --shards N it measures instead what a switch's `threads = N` buys: N switch pipelines,
// each on its own thread and socket with its own job and sender, as the switch daemon's shards,
// against one, in the same run: packets/s and packets per CPU second of the switch threads.
//
//   build/bin/datapath_bench [--seconds S] [--rounds R] [--values-per-packet K] [--shards N]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "engines/ps/parameter_server.h"
#include "engines/switch/switch_pipeline.h"
#include "proto/byte_order.h"
#include "proto/header.h"
#include "runtime/udp_socket.h"

using namespace atp;

namespace {

using Packets = std::vector<std::vector<std::uint8_t>>;

std::vector<std::uint8_t> packet(std::uint32_t job, std::uint32_t seq, std::uint8_t flags,
                                 std::uint32_t workers, std::uint16_t k) {
  proto::Header h;
  h.flags = flags;
  h.job = job;
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

// Per seq of a window of 64: two workers' fragments and the PS's result.
Packets switch_mix(std::uint32_t job, std::uint16_t k) {
  Packets mix;
  for (std::uint32_t seq = 0; seq < 64; ++seq) {
    mix.push_back(packet(job, seq, 0, 1, k));
    mix.push_back(packet(job, seq, 0, 2, k));
    mix.push_back(packet(job, seq, proto::flag::kResult, 0, k));
  }
  return mix;
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Round {
  double seconds = 0;
  double cpu_seconds = 0;  // of the measured (draining) thread
  std::uint64_t packets = 0;
};

// Blasts `mix` at `target` in batches of 64 until destroyed.
// `renumber`: give every packet sent a new seq (the PS must see fresh fragments).
class Sender {
 public:
  Sender(const runtime::Endpoint& target, Packets mix, bool renumber)
      : thread_([this, target, mix = std::move(mix), renumber]() mutable {
          runtime::UdpSocket out(*runtime::Endpoint::parse("127.0.0.1:0"));
          runtime::SendBatch batch;
          std::size_t i = 0;
          std::uint32_t seq = 0;
          while (!stop_.load(std::memory_order_relaxed)) {
            for (int n = 0; n < 64; ++n, i = (i + 1) % mix.size()) {
              if (renumber) proto::store_be32(mix[i].data() + 12, seq++);
              batch.add(target, mix[i]);
            }
            out.send(batch);
          }
        }) {}
  ~Sender() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Drains `target` for `seconds`, handing each datagram to `forward`, which queues what leaves
// (borrowed from the receive batch, or from an engine's outbox, as the daemons do).
template <typename Forward>
Round drain(runtime::UdpSocket& target, double seconds, Forward& forward) {
  runtime::ReceiveBatch received(64, 65536);
  runtime::SendBatch to_send;
  Round r;
  const double cpu_start = thread_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const std::size_t n = target.receive(received);
    for (std::size_t i = 0; i < n; ++i) forward(received.packet(i), to_send);
    forward.flush(to_send);
    if (to_send.size() > 0) target.send(to_send);
    forward.sent();
    r.packets += n;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_seconds = thread_cpu_seconds() - cpu_start;
  return r;
}

template <typename Forward>
Round measure(runtime::UdpSocket& target, Packets mix, bool renumber, double seconds,
              Forward& forward) {
  Round r;
  {
    Sender sender(target.local(), std::move(mix), renumber);
    r = drain(target, seconds, forward);
  }
  runtime::ReceiveBatch left(64, 65536);
  while (target.receive(left) > 0) {
  }
  return r;
}

// What the measured thread does with each datagram; what it queues is sent after the batch.
// Each borrows its datagrams (from the receive batch, or its engine's outbox), as the daemons do.
struct BareForwarder {
  void operator()(std::span<std::uint8_t> p, runtime::SendBatch& out) { out.add_borrowed(sink, p); }
  void flush(runtime::SendBatch&) {}
  void sent() {}
  runtime::Endpoint sink;
};

// A switch shard: its own pipeline (its job, the whole pool for this bench) and socket; every
// copy the pipeline asks for goes to the sink.
struct Shard {
  Shard(std::uint32_t job, std::uint16_t k, const runtime::Endpoint& sink)
      : pipeline({proto::Level::rack, 1024, k, engines::Policy::atp}), sink(sink) {
    pipeline.add_job({job, {0, 0}, {0}, 64, 0, 0, /*fan_in=*/2, 0, /*multicast_group=*/1});
  }
  void operator()(std::span<std::uint8_t> p, runtime::SendBatch& out) {
    const engines::Verdict v = pipeline.process(p, 0, 0);
    if (v.action == engines::Verdict::Action::port) out.add_borrowed(sink, p);
    if (v.action == engines::Verdict::Action::multicast)
      for (std::size_t i = 0; i < pipeline.multicast_ports(v.group).size(); ++i)
        out.add_borrowed(sink, p);
  }
  void flush(runtime::SendBatch&) {}
  void sent() {}
  engines::SwitchPipeline pipeline;
  runtime::Endpoint sink;
  runtime::UdpSocket socket{*runtime::Endpoint::parse("127.0.0.1:0")};
};

// The PS engine: its results collect in its outbox over the batch, as in the PS daemon.
struct PsForwarder {
  explicit PsForwarder(std::uint16_t k, const runtime::Endpoint& sink) : sink(sink) {
    ps.add_job({1, {2}, 64, k, 0});
  }
  void operator()(std::span<std::uint8_t> p, runtime::SendBatch&) { ps.on_packet(0, p, outbox); }
  void flush(runtime::SendBatch& out) {
    for (auto& d : outbox.packets()) out.add_borrowed(sink, d.bytes);
  }
  void sent() { outbox.clear(); }
  engines::ParameterServer ps;
  Outbox outbox;
  runtime::Endpoint sink;
};

void compare_with_forwarder(double seconds, std::uint16_t k, int rounds) {
  runtime::UdpSocket sink(*runtime::Endpoint::parse("127.0.0.1:0"));
  const runtime::Endpoint sink_address = sink.local();
  Shard through_switch(1, k, sink_address);
  runtime::UdpSocket& target = through_switch.socket;
  PsForwarder through_ps(k, sink_address);
  BareForwarder bare{sink_address};
  Packets rack_sums = {packet(1, 0, 0, 0, k)};
  proto::store_be32(rack_sums[0].data() + 24, 1);  // racks_bitmap: rack 0 whole

  double forwarder = 0, switch_pps = 0, forwarder_ps = 0, ps_pps = 0;
  auto rate = [rounds](const Round& r) { return r.packets / r.seconds / rounds; };
  for (int round = 0; round < rounds; ++round) {
    forwarder += rate(measure(target, switch_mix(1, k), false, seconds, bare));
    switch_pps += rate(measure(target, switch_mix(1, k), false, seconds, through_switch));
    forwarder_ps += rate(measure(target, rack_sums, true, seconds, bare));
    ps_pps += rate(measure(target, rack_sums, true, seconds, through_ps));
  }
  const auto* c = through_switch.pipeline.job_counters(1);
  std::printf("K=%u, %.1f s per round, %d rounds alternating, packets/s in\n", k, seconds,
              rounds);
  std::printf("switch: bare forwarder %10.0f  ATP switch %10.0f  ratio %.2f  (completed %llu)\n",
              forwarder, switch_pps, switch_pps / forwarder,
              static_cast<unsigned long long>(c->completed));
  std::printf("ps:     bare forwarder %10.0f  ATP PS     %10.0f  ratio %.2f  (completed %llu)\n",
              forwarder_ps, ps_pps, ps_pps / forwarder_ps,
              static_cast<unsigned long long>(through_ps.ps.job_counters(1)->completed));
}

// `shards` switch shards at once, each drained by its own thread and fed by its own sender.
Round run_shards(unsigned shards, double seconds, std::uint16_t k,
                 const runtime::Endpoint& sink) {
  std::vector<std::unique_ptr<Shard>> all;
  for (unsigned i = 0; i < shards; ++i) all.push_back(std::make_unique<Shard>(i + 1, k, sink));
  std::vector<Round> rounds(shards);
  {
    std::vector<std::unique_ptr<Sender>> senders;
    for (unsigned i = 0; i < shards; ++i)
      senders.push_back(
          std::make_unique<Sender>(all[i]->socket.local(), switch_mix(i + 1, k), false));
    std::vector<std::thread> drains;
    for (unsigned i = 0; i < shards; ++i)
      drains.emplace_back([&, i] {
        rounds[i] = drain(all[i]->socket, seconds, *all[i]);
      });
    for (auto& t : drains) t.join();
  }
  Round total;
  for (const Round& r : rounds) {
    total.seconds = std::max(total.seconds, r.seconds);
    total.cpu_seconds += r.cpu_seconds;
    total.packets += r.packets;
  }
  return total;
}

void compare_shards(unsigned shards, double seconds, std::uint16_t k, int rounds) {
  runtime::UdpSocket sink(*runtime::Endpoint::parse("127.0.0.1:0"));
  Round one, many;
  for (int round = 0; round < rounds; ++round) {  // alternating
    const Round a = run_shards(1, seconds, k, sink.local());
    const Round b = run_shards(shards, seconds, k, sink.local());
    one = {one.seconds + a.seconds, one.cpu_seconds + a.cpu_seconds, one.packets + a.packets};
    many = {many.seconds + b.seconds, many.cpu_seconds + b.cpu_seconds, many.packets + b.packets};
  }
  const unsigned cores = std::thread::hardware_concurrency();
  std::printf("K=%u, %.1f s per round, %d rounds alternating, %u cores; each shard has its own "
              "sender thread\n", k, seconds, rounds, cores);
  auto line = [](unsigned n, const Round& r) {
    std::printf("shards=%u: %10.0f packets/s in, %10.0f packets per switch-thread CPU second\n",
                n, r.packets / r.seconds, r.packets / r.cpu_seconds);
    return r.packets / r.cpu_seconds;
  };
  const double per_cpu_one = line(1, one);
  const double per_cpu_many = line(shards, many);
  std::printf("packets per CPU second, %u shards / 1: %.2f (1.00: no cost from sharding)\n",
              shards, per_cpu_many / per_cpu_one);
  if (cores < 2 * shards)
    std::printf("note: %u shards and their senders need %u cores; packets/s cannot scale here\n",
                shards, 2 * shards);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ATP switch and PS datapaths next to a bare UDP forwarder, on loopback"};
  double seconds = 2.0;
  unsigned k = 64;
  unsigned shards = 0;
  int rounds = 2;
  app.add_option("--seconds", seconds, "length of each measured round")
      ->capture_default_str()->check(CLI::Range(0.1, 600.0));
  app.add_option("-k,--values-per-packet", k, "values per packet (K)")
      ->capture_default_str()->check(CLI::Range(1u, unsigned{proto::kMaxValues}));
  app.add_option("--rounds", rounds, "rounds of each, alternating (ratios are of the sums)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--shards", shards,
                 "measure N switch shards (threads = N) against one instead of the forwarder")
      ->check(CLI::Range(2u, 64u));
  CLI11_PARSE(app, argc, argv);
  if (shards > 0) compare_shards(shards, seconds, static_cast<std::uint16_t>(k), rounds);
  else compare_with_forwarder(seconds, static_cast<std::uint16_t>(k), rounds);
  return 0;
}
