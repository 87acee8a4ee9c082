#pragma once
// The host-only baseline: a bandwidth-optimal chunked ring allreduce (NCCL's and Horovod's
// ring), packet by packet on the simulated links. Worker r sends chunk (r - s) mod N to worker
// r + 1 at step s; the first N - 1 steps add (reduce-scatter), the last N - 1 copy (all-gather).
// Each packet of a step goes on as soon as its predecessor's packet of the step before arrived,
// so the chunks stream through the ring at the slowest link's rate.
//
// Values travel as the same scaled int32 as ATP's, so the result equals ATP's bit for bit and
// the simulator checks it the same way. The baseline assumes a lossless fabric, as NCCL on
// RoCE with PFC does: at most `window` packets to the successor wait for its acknowledgement,
// which keeps switch queues bounded, and nothing is ever resent. Switches forward its packets
// by destination (sim::SwitchNode), without aggregating.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "sim/collective.h"

namespace atp::sim {

struct RingConfig {
  std::uint32_t rank = 0, workers = 1;
  NodeId self = 0, successor = 0;
  NodeId uplink = 0;  // every packet leaves through the rack switch
  std::uint16_t values_per_packet = 256;
  float scale = 1;
  std::uint32_t window = 64;  // data packets to the successor not yet acknowledged
};

// A ring packet: this header, then `count` big-endian int32 values for data.
inline constexpr std::uint32_t kRingMagic = 0x52494e47;  // "RING": never an ATP version byte
inline constexpr std::size_t kRingHeaderBytes = 44;      // as long as ATP's header
// Where a ring packet goes: what a switch reads to forward it. nullopt for any other packet.
std::optional<NodeId> ring_destination(std::span<const std::uint8_t> packet);

class RingAllreduce : public Collective {
 public:
  explicit RingAllreduce(RingConfig config);
  void set_self(NodeId self) { config_.self = self; }
  void set_successor(NodeId successor) { config_.successor = successor; }
  NodeId self() const { return config_.self; }

  std::uint32_t submit(Time now, std::span<const float> input, std::span<float> output,
                       Outbox& out) override;
  void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                 NodeId from) override;
  void on_timer(Time, Outbox&) override {}
  std::optional<Time> next_timer() const override { return std::nullopt; }
  std::vector<std::uint32_t> take_completed() override;
  std::string error() const override { return error_; }
  engines::WorkerStats stats() const override { return stats_; }

 private:
  struct Tensor {
    bool submitted = false, finished = false;
    std::uint32_t queued = 0;  // its packets in sends_, which read `sum` when they go
    float* output = nullptr;
    std::size_t values = 0;
    std::vector<std::uint8_t> sum;  // big-endian int32, the chunks as far as they have come
    std::vector<std::vector<std::uint8_t>> early;  // packets that came before submit()
    std::uint64_t received = 0, expected = 0;
  };
  struct Send {
    std::uint32_t tensor, step, packet;
  };
  struct Span {
    std::size_t first, count;
  };

  Span chunk(const Tensor& t, std::uint32_t index) const;
  Span packet_span(const Tensor& t, std::uint32_t chunk_index, std::uint32_t packet) const;
  std::uint32_t packets_in(const Tensor& t, std::uint32_t chunk_index) const;
  std::uint32_t chunk_sent_at(std::uint32_t rank, std::uint32_t step) const;
  std::uint32_t predecessor_rank() const { return (config_.rank + config_.workers - 1) % config_.workers; }
  void take_data(std::uint32_t id, Tensor& t, std::span<const std::uint8_t> packet);
  void queue(std::uint32_t id, Tensor& t, std::uint32_t step, std::uint32_t packet);
  void finish(std::uint32_t id, Tensor& t);
  void pump(Outbox& out);
  void acknowledge(NodeId to, Outbox& out);

  RingConfig config_;
  std::uint32_t steps_;  // 2 (N - 1): N - 1 adding, N - 1 copying; none alone
  std::map<std::uint32_t, Tensor> tensors_;  // unfinished, by id
  std::uint32_t next_id_ = 0;
  std::deque<Send> sends_;
  // Data packets to the successor and from the predecessor; 32-bit serial numbers, as acks carry.
  std::uint32_t sent_ = 0, acknowledged_ = 0, received_from_predecessor_ = 0;
  std::vector<std::uint32_t> completed_;
  engines::WorkerStats stats_;
  std::string error_;
};

}  // namespace atp::sim
