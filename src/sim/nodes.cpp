#include "sim/nodes.h"

#include <algorithm>
#include <cstring>

#include "sim/ring_allreduce.h"

namespace atp::sim {

void SwitchNode::receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) {
  if (std::optional<NodeId> to = ring_destination(bytes)) return forward(sim, *to, bytes);
  const engines::Verdict v = switch_.ingress(bytes, engines::port_of_node(from), sim.now());
  switch (v.action) {
    case engines::Verdict::Action::drop: return;
    case engines::Verdict::Action::port: send_copy(sim, v.port, bytes); return;
    case engines::Verdict::Action::multicast:
      for (engines::Port member : pipeline().multicast_ports(v.group)) send_copy(sim, member, bytes);
      return;
  }
}

// Egress: each copy is marked by the queue of the link it leaves on.
void SwitchNode::send_copy(Simulator& sim, engines::Port port, std::span<const std::uint8_t> bytes) {
  const NodeId to = engines::node_of_port(port);
  if (!sim.queue_above_ecn(id_, to)) return sim.send(id_, to, bytes);
  copy_.assign(bytes.begin(), bytes.end());
  pipeline().egress(copy_, true);
  sim.send(id_, to, copy_);
}

// A host-only baseline's packet: no pipeline, no ECN (the baseline has no congestion control).
void SwitchNode::forward(Simulator& sim, NodeId to, std::span<const std::uint8_t> bytes) {
  auto route = routes_.find(to);
  if (route != routes_.end()) return sim.send(id_, route->second, bytes);
  if (default_route_) sim.send(id_, *default_route_, bytes);
}

void PsNode::receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) {
  ps_.on_packet(sim.now(), bytes, outbox_, from);
  for (auto& d : outbox_.packets()) sim.send(id_, d.to, d.bytes);
  outbox_.clear();
}

bool JobVerifier::check(std::uint32_t iteration, std::uint32_t tensor,
                        std::span<const float> result, Collective::Range kept) {
  auto key = std::make_pair(iteration, tensor);
  auto it = expected_.find(key);
  if (it == expected_.end()) {
    exact_.reset(result.size());
    scratch_.resize(result.size());
    for (std::uint32_t w = 0; w < workers_; ++w) {
      source_.fill(job_, w, iteration, tensor, scratch_);
      exact_.add(scratch_);
    }
    Expected e{std::vector<float>(result.size()), workers_};
    exact_.finish(e.values);
    it = expected_.emplace(key, std::move(e)).first;
  }
  Expected& e = it->second;
  // Bit for bit: NaN results must carry the same bits too.
  const bool exact = e.values.size() == result.size() &&
                     kept.offset + kept.count <= result.size() &&
                     std::memcmp(e.values.data() + kept.offset, result.data() + kept.offset,
                                 kept.count * sizeof(float)) == 0;
  ++checked_;
  if (!exact) ++mismatches_;
  if (--e.remaining == 0) expected_.erase(it);
  return exact;
}

TrainingWorkerNode::TrainingWorkerNode(std::unique_ptr<Collective> collective,
                                       TrainingPlan plan, std::uint32_t job_rank,
                                       JobVerifier& verifier)
    : collective_(std::move(collective)), plan_(std::move(plan)), job_rank_(job_rank),
      verifier_(verifier) {
  for (std::size_t size : plan_.tensor_sizes) {
    inputs_.emplace_back(size);
    outputs_.emplace_back(size);
  }
}

void TrainingWorkerNode::start(Simulator& sim, NodeId self) {
  self_ = self;
  if (plan_.iterations == 0) return;
  iteration_start_ = sim.now() + plan_.start;
  flush(sim);
}

Time TrainingWorkerNode::ready_at(std::size_t tensor) const {
  return iteration_start_ + (plan_.ready.empty() ? plan_.compute : plan_.ready[tensor]);
}

// Hands the collective every tensor whose gradient is ready by now, in order.
void TrainingWorkerNode::submit_ready(Simulator& sim) {
  for (; next_tensor_ < inputs_.size() && ready_at(next_tensor_) <= sim.now(); ++next_tensor_) {
    const std::size_t t = next_tensor_;
    if (t == 0) {
      allreduce_started_ = sim.now();
      tensor_ids_.clear();
    }
    verifier_.source().fill(verifier_.job(), job_rank_, iteration_, static_cast<std::uint32_t>(t),
                            inputs_[t]);
    tensor_ids_.push_back(collective_->submit(sim.now(), inputs_[t], outputs_[t], outbox_));
    ++outstanding_;
  }
}

void TrainingWorkerNode::collect(Simulator& sim) {
  for (std::uint32_t id : collective_->take_completed()) {
    const std::size_t t = id - tensor_ids_.front();
    verifier_.check(iteration_, static_cast<std::uint32_t>(t), outputs_[t],
                    collective_->kept(outputs_[t].size()));
    --outstanding_;
  }
  const bool all_in = next_tensor_ == inputs_.size() && outstanding_ == 0;
  if (!finished() && all_in && sim.now() >= iteration_start_ + plan_.compute) end_iteration(sim);
}

void TrainingWorkerNode::end_iteration(Simulator& sim) {
  if (!inputs_.empty()) communication_time_ += sim.now() - allreduce_started_;
  if (iteration_ == 0) {
    first_allreduce_time_ = communication_time_;
    first_iteration_end_ = sim.now();
  }
  if (++iteration_ == plan_.iterations) {
    finish_time_ = sim.now();
    if (on_finished_) on_finished_();
    return;
  }
  iteration_start_ = sim.now();
  next_tensor_ = 0;
}

void TrainingWorkerNode::receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) {
  collective_->on_packet(sim.now(), bytes, outbox_, from);
  collect(sim);
  flush(sim);
}

void TrainingWorkerNode::timer(Simulator& sim) {
  if (!finished()) submit_ready(sim);
  collective_->on_timer(sim.now(), outbox_);
  collect(sim);
  flush(sim);
}

// Sends what the collective queued and re-arms one timer for the collective, the next
// gradient to become ready, and the end of compute.
void TrainingWorkerNode::flush(Simulator& sim) {
  for (auto& d : outbox_.packets()) sim.send(self_, d.to, d.bytes);
  outbox_.clear();
  std::optional<Time> next = collective_->next_timer();
  auto earliest = [&](Time t) {
    if (!next || t < *next) next = t;
  };
  const Time compute_end = iteration_start_ + plan_.compute;
  if (!finished()) {
    if (next_tensor_ < inputs_.size()) earliest(ready_at(next_tensor_));
    // Compute still running, or an iteration with nothing left to wait for (no tensors).
    else if (sim.now() < compute_end || outstanding_ == 0) earliest(std::max(sim.now(), compute_end));
  }
  if (next) sim.arm_timer(self_, *next);
}

}  // namespace atp::sim
