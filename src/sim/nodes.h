#pragma once
// Simulator nodes that run the real engines: a switch, a parameter server, and a training
// worker that computes, allreduces its tensors, and checks every result against the exact sum.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "conformance/switch_trace.h"
#include "engines/ps/parameter_server.h"
#include "engines/switch/switch_pipeline.h"
#include "engines/worker/worker.h"
#include "workload/gradients.h"
#include "sim/collective.h"
#include "sim/simulator.h"

namespace atp::sim {

// The simulated jobs train on the synthetic gradients of workload/.
using workload::ExactSum;
using workload::GradientSource;

class SwitchNode : public Node {
 public:
  // With `record`, everything the switch does is kept as a trace (conformance/switch_trace.h).
  explicit SwitchNode(engines::SwitchConfig config, bool record = false)
      : switch_(config, record) {}
  engines::SwitchPipeline& pipeline() { return switch_.pipeline(); }
  void add_job(const engines::SwitchJob& job) { switch_.add_job(job); }
  void remove_job(std::uint32_t job) { switch_.remove_job(job); }
  const conformance::Trace& trace() const { return switch_.trace(); }
  void receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) override;
  void set_id(NodeId id) { id_ = id; }
  // Plain forwarding by destination for the host-only baselines' packets (ring allreduce),
  // which the ATP pipeline never sees: `to` is reached through the neighbour `via`; any
  // destination without a route goes to the default (the uplink).
  void add_route(NodeId to, NodeId via) { routes_[to] = via; }
  void set_default_route(NodeId via) { default_route_ = via; }

 private:
  void send_copy(Simulator& sim, engines::Port port, std::span<const std::uint8_t> bytes);
  void forward(Simulator& sim, NodeId to, std::span<const std::uint8_t> bytes);

  conformance::RecordingSwitch switch_;
  std::vector<std::uint8_t> copy_;
  NodeId id_ = 0;
  std::unordered_map<NodeId, NodeId> routes_;
  std::optional<NodeId> default_route_;
};

class PsNode : public Node {
 public:
  engines::ParameterServer& ps() { return ps_; }
  const engines::ParameterServer& ps() const { return ps_; }
  void receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) override;
  void set_id(NodeId id) { id_ = id; }

 private:
  engines::ParameterServer ps_;
  Outbox outbox_;
  NodeId id_ = 0;
};

// What a job's training loop does: `iterations` x (compute, allreducing each tensor once its
// gradient is ready), the next iteration starting when every result is in (DDP: the optimizer
// step waits for the last bucket).
struct TrainingPlan {
  std::vector<std::size_t> tensor_sizes;  // floats per tensor, in the order they are allreduced
  // When each tensor's gradient is ready, from the iteration's start (the backward pass
  // overlapping communication). Empty: every tensor is ready when compute ends. Each at most
  // `compute`, in order.
  std::vector<Duration> ready;
  std::uint32_t iterations = 1;
  Duration compute = 0;
  Duration start = 0;  // when the job's first compute phase begins
  std::uint32_t samples_per_iteration = 0;  // per worker (0: not a model's workload)
  double model_scale = 1;  // how much a model's bytes and compute were scaled down
};

// Shared by a job's workers: regenerates every worker's gradients to compute the exact sum
// once per (iteration, tensor), and collects the verdicts.
class JobVerifier {
 public:
  JobVerifier(GradientSource source, std::uint32_t job, std::uint32_t workers,
              std::uint16_t values_per_packet, float scale)
      : source_(source), job_(job), workers_(workers), exact_(values_per_packet, scale, workers) {}

  // Compares a worker's result bit for bit, the values `kept` of it (a reduce-scatter fills
  // its own shard alone); returns true if exact.
  bool check(std::uint32_t iteration, std::uint32_t tensor, std::span<const float> result,
             Collective::Range kept);
  std::uint64_t checked() const { return checked_; }
  std::uint64_t mismatches() const { return mismatches_; }
  const GradientSource& source() const { return source_; }
  std::uint32_t job() const { return job_; }

 private:
  struct Expected {
    std::vector<float> values;
    std::uint32_t remaining;
  };
  GradientSource source_;
  std::uint32_t job_, workers_;
  ExactSum exact_;
  std::vector<float> scratch_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, Expected> expected_;
  std::uint64_t checked_ = 0, mismatches_ = 0;
};

class TrainingWorkerNode : public Node {
 public:
  TrainingWorkerNode(std::unique_ptr<Collective> collective, TrainingPlan plan,
                     std::uint32_t job_rank, JobVerifier& verifier);
  // Called once, when the last iteration is done.
  void on_finished(std::function<void()> f) { on_finished_ = std::move(f); }

  void start(Simulator& sim, NodeId self);
  void receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) override;
  void timer(Simulator& sim) override;

  bool finished() const { return iteration_ == plan_.iterations; }
  bool failed() const { return !collective_->error().empty(); }
  Time finish_time() const { return finish_time_; }
  Time first_iteration_end() const { return first_iteration_end_; }
  // From each iteration's first submitted tensor to its last result.
  Duration communication_time() const { return communication_time_; }
  // The first iteration's allreduce: the launch's run handshake, windows still opening.
  Duration first_allreduce_time() const { return first_allreduce_time_; }
  Collective& collective() { return *collective_; }
  const Collective& collective() const { return *collective_; }

 private:
  Time ready_at(std::size_t tensor) const;
  void submit_ready(Simulator& sim);
  void collect(Simulator& sim);
  void end_iteration(Simulator& sim);
  void flush(Simulator& sim);

  std::unique_ptr<Collective> collective_;
  TrainingPlan plan_;
  std::uint32_t job_rank_;
  JobVerifier& verifier_;
  Outbox outbox_;
  NodeId self_ = 0;
  std::uint32_t iteration_ = 0;
  Time iteration_start_ = 0, allreduce_started_ = 0, finish_time_ = 0, first_iteration_end_ = 0;
  Duration communication_time_ = 0, first_allreduce_time_ = 0;
  std::vector<std::vector<float>> inputs_, outputs_;
  std::vector<std::uint32_t> tensor_ids_;
  std::size_t next_tensor_ = 0;  // the next to submit this iteration
  std::size_t outstanding_ = 0;
  std::function<void()> on_finished_;
};

}  // namespace atp::sim
