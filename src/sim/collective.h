#pragma once
// What a simulated training worker allreduces with: ATP's worker engine, or a baseline that
// runs on the hosts alone (sim/ring_allreduce.h). Both are sans-IO: packets and time in,
// packets out, so the training loop (sim/nodes.h) drives either the same way.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engines/common.h"
#include "engines/worker/worker.h"

namespace atp::sim {

enum class CollectiveKind { atp, ring };

class Collective {
 public:
  virtual ~Collective() = default;
  // Starts an allreduce of `input` into `output`; returns its id (consecutive from 0).
  virtual std::uint32_t submit(Time now, std::span<const float> input, std::span<float> output,
                               Outbox& out) = 0;
  virtual void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                         NodeId from) = 0;
  virtual void on_timer(Time now, Outbox& out) = 0;
  virtual std::optional<Time> next_timer() const = 0;
  // Ids of allreduces finished since the last call.
  virtual std::vector<std::uint32_t> take_completed() = 0;
  virtual std::string error() const = 0;  // empty while all is well
  virtual engines::WorkerStats stats() const = 0;
  // The control plane lent the job more of the pool or took it back (ATP only).
  virtual void set_home(const engines::HomeSlice&) {}
  // Which values of an output of `size` values the collective fills: all of them for an
  // allreduce, this worker's shard for a reduce-scatter.
  struct Range {
    std::size_t offset = 0, count = 0;
  };
  virtual Range kept(std::size_t size) const { return {0, size}; }
};

class AtpCollective : public Collective {
 public:
  explicit AtpCollective(engines::WorkerConfig config) : worker_(std::move(config)) {}
  // A reduce-scatter instead: every tensor cut into one shard per rank of the job (`ranks`,
  // where each sits), this worker being rank `self`; its shard's sums alone come down to it
  // (docs/protocol.md §8.1).
  AtpCollective(engines::WorkerConfig config, std::vector<proto::ResultOwner> ranks,
                std::uint32_t self)
      : worker_(std::move(config)), ranks_(std::move(ranks)), self_(self) {}
  std::uint32_t submit(Time now, std::span<const float> input, std::span<float> output,
                       Outbox& out) override;
  Range kept(std::size_t size) const override;
  void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                 NodeId from) override {
    worker_.on_packet(now, packet, out, from);
  }
  void on_timer(Time now, Outbox& out) override { worker_.on_timer(now, out); }
  std::optional<Time> next_timer() const override { return worker_.next_timer(); }
  std::vector<std::uint32_t> take_completed() override;
  std::string error() const override { return worker_.error(); }
  engines::WorkerStats stats() const override { return worker_.stats(); }
  void set_home(const engines::HomeSlice& home) override { worker_.set_home(home); }

 private:
  Range shard(std::size_t size, std::size_t rank) const;

  engines::Worker worker_;
  std::vector<proto::ResultOwner> ranks_;  // empty: allreduce
  std::uint32_t self_ = 0;
  // A reduce-scatter call is one worker tensor per rank, its ids consecutive: call c holds
  // tensors c x ranks .. c x ranks + ranks - 1. Shards done per call not yet complete.
  std::map<std::uint32_t, std::size_t> shards_done_;
};

}  // namespace atp::sim
