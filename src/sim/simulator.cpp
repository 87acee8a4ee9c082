#include "sim/simulator.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "proto/header.h"

namespace atp::sim {

namespace {

// Folds one 64-bit word into the trace hash (FNV-1a over words instead of bytes).
std::uint64_t mix(std::uint64_t h, std::uint64_t word) { return (h ^ word) * 0x100000001b3ull; }

}  // namespace

Simulator::Simulator(std::uint64_t seed) : rng_(seed) {}

NodeId Simulator::add_node(std::unique_ptr<Node> node) {
  nodes_.push_back(std::move(node));
  timer_wanted_.push_back(-1);
  timer_scheduled_.push_back(-1);
  return static_cast<NodeId>(nodes_.size() - 1);
}

void Simulator::connect(NodeId a, NodeId b, const LinkSpec& spec) {
  if (a >= nodes_.size() || b >= nodes_.size()) throw std::out_of_range("connect: no such node");
  links_[key(a, b)] = Link{spec, 0, {}};
  links_[key(b, a)] = Link{spec, 0, {}};
}

std::uint32_t Simulator::store(std::span<const std::uint8_t> bytes) {
  std::uint32_t index;
  if (free_packets_.empty()) {
    index = static_cast<std::uint32_t>(packets_.size());
    packets_.emplace_back();
  } else {
    index = free_packets_.back();
    free_packets_.pop_back();
  }
  packets_[index].assign(bytes.begin(), bytes.end());
  return index;
}

void Simulator::send(NodeId from, NodeId to, std::span<const std::uint8_t> bytes) {
  auto it = links_.find(key(from, to));
  if (it == links_.end())
    throw std::logic_error("no link from node " + std::to_string(from) + " to " +
                           std::to_string(to));
  Link& link = it->second;
  const LinkSpec& spec = link.spec;
  ++link.counters.sent;
  if (drop_filter_ && drop_filter_(from, to, bytes)) {
    ++link.counters.filtered;
    return;
  }
  if (rng_.chance(spec.loss)) {
    ++link.counters.lost;
    return;
  }

  // Serialization on a FIFO link: the queue is the time the link stays busy.
  const double bytes_per_ns = spec.gbps / 8;
  const Time start = std::max(now_, link.busy_until);
  if (spec.gbps > 0) {
    const std::size_t wire_bytes = bytes.size() + spec.frame_bytes;
    if (queued_bytes(link) + wire_bytes > spec.queue_bytes) {
      ++link.counters.tail_dropped;
      return;
    }
    link.busy_until = start + static_cast<Time>(static_cast<double>(wire_bytes) / bytes_per_ns);
  }
  Time arrive = link.busy_until > now_ ? link.busy_until + spec.delay : now_ + spec.delay;
  if (rng_.chance(spec.reorder)) {
    arrive += 1 + static_cast<Time>(rng_.below(static_cast<std::uint64_t>(spec.reorder_delay)));
    ++link.counters.reordered;
  }
  const std::uint32_t packet = store(bytes);
  if (rng_.chance(spec.duplicate)) {
    ++link.counters.duplicated;
    const Time later = arrive + 1 + static_cast<Time>(rng_.below(
                                        static_cast<std::uint64_t>(spec.reorder_delay) + 1));
    schedule(later, to, from, store(packets_[packet]));
  }
  schedule(arrive, to, from, packet);
}

// What waits on the link now: the time it stays busy, at its rate.
std::size_t Simulator::queued_bytes(const Link& link) const {
  if (link.spec.gbps <= 0) return 0;
  const Duration busy = std::max<Time>(0, link.busy_until - now_);
  return static_cast<std::size_t>(static_cast<double>(busy) * link.spec.gbps / 8);
}

bool Simulator::queue_above_ecn(NodeId from, NodeId to) const {
  auto it = links_.find(key(from, to));
  return it != links_.end() && queued_bytes(it->second) > it->second.spec.ecn_bytes;
}

void Simulator::arm_timer(NodeId node, Time at) {
  at = std::max(at, now_);
  timer_wanted_[node] = at;
  if (timer_scheduled_[node] < 0 || at < timer_scheduled_[node]) {
    timer_scheduled_[node] = at;
    schedule(at, node, node, kTimer);
  }
}

void Simulator::schedule(Time at, NodeId node, NodeId from, std::uint32_t packet) {
  heap_.push_back(Event{at, order_++, node, from, packet});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

bool Simulator::step() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Event e = heap_.back();
    heap_.pop_back();
    if (e.packet == kTimer) {
      if (e.at != timer_scheduled_[e.node]) continue;  // an earlier one replaced it
      if (timer_wanted_[e.node] > e.at) {              // moved later: wait on
        timer_scheduled_[e.node] = timer_wanted_[e.node];
        schedule(timer_wanted_[e.node], e.node, e.node, kTimer);
        continue;
      }
      timer_scheduled_[e.node] = timer_wanted_[e.node] = -1;
    }
    now_ = e.at;
    ++events_;
    record(e);
    if (e.packet == kTimer) {
      nodes_[e.node]->timer(*this);
    } else {
      nodes_[e.node]->receive(*this, e.from, packets_[e.packet]);
      free_packets_.push_back(e.packet);
    }
    return true;
  }
  return false;
}

void Simulator::run(Time until, const std::function<bool()>& stop) {
  while (!heap_.empty() && heap_.front().at <= until) {
    if (!step()) break;
    if (stop && stop()) break;
  }
}

void Simulator::record(const Event& e) {
  std::uint64_t h = mix(trace_hash_, static_cast<std::uint64_t>(e.at));
  h = mix(h, (std::uint64_t{e.node} << 32) | e.from);
  if (e.packet != kTimer) {
    const auto& bytes = packets_[e.packet];
    std::uint64_t word[(proto::kHeaderBytes + 7) / 8] = {};
    std::memcpy(word, bytes.data(), std::min(bytes.size(), proto::kHeaderBytes));
    for (std::uint64_t w : word) h = mix(h, w);
  }
  trace_hash_ = h;
}

LinkCounters Simulator::link_totals() const {
  LinkCounters t;
  for (const auto& [k, link] : links_) {
    t.sent += link.counters.sent;
    t.lost += link.counters.lost;
    t.tail_dropped += link.counters.tail_dropped;
    t.duplicated += link.counters.duplicated;
    t.reordered += link.counters.reordered;
    t.filtered += link.counters.filtered;
  }
  return t;
}

}  // namespace atp::sim
