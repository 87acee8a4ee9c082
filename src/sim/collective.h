#pragma once
// What a simulated training worker allreduces with: ATP's worker engine, or a baseline that
// runs on the hosts alone (sim/ring_allreduce.h). Both are sans-IO: packets and time in,
// packets out, so the training loop (sim/nodes.h) drives either the same way.
#include <cstdint>
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
};

class AtpCollective : public Collective {
 public:
  explicit AtpCollective(engines::WorkerConfig config) : worker_(std::move(config)) {}
  std::uint32_t submit(Time now, std::span<const float> input, std::span<float> output,
                       Outbox& out) override {
    return worker_.submit(now, input, output, out);
  }
  void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                 NodeId from) override {
    worker_.on_packet(now, packet, out, from);
  }
  void on_timer(Time now, Outbox& out) override { worker_.on_timer(now, out); }
  std::optional<Time> next_timer() const override { return worker_.next_timer(); }
  std::vector<std::uint32_t> take_completed() override { return worker_.take_completed(); }
  std::string error() const override { return worker_.error(); }
  engines::WorkerStats stats() const override { return worker_.stats(); }
  void set_home(const engines::HomeSlice& home) override { worker_.set_home(home); }

 private:
  engines::Worker worker_;
};

}  // namespace atp::sim
