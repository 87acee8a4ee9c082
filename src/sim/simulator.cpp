#include "sim/simulator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "proto/header.h"

namespace atp::sim {

namespace {

// FNV-1a, folded over each event's time, endpoints and the packet's header bytes.
std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t size) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

Simulator::Simulator(std::uint64_t seed) : rng_(seed) {}

NodeId Simulator::add_node(std::unique_ptr<Node> node) {
  nodes_.push_back(std::move(node));
  armed_.push_back(-1);
  return static_cast<NodeId>(nodes_.size() - 1);
}

void Simulator::connect(NodeId a, NodeId b, const LinkSpec& spec) {
  if (a >= nodes_.size() || b >= nodes_.size()) throw std::out_of_range("connect: no such node");
  links_[key(a, b)] = Link{spec, 0, {}};
  links_[key(b, a)] = Link{spec, 0, {}};
}

void Simulator::send(NodeId from, NodeId to, std::vector<std::uint8_t> bytes) {
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
    const auto queued = static_cast<std::size_t>(static_cast<double>(start - now_) * bytes_per_ns);
    if (queued + bytes.size() > spec.queue_bytes) {
      ++link.counters.tail_dropped;
      return;
    }
    if (queued > spec.ecn_bytes && bytes.size() >= proto::kHeaderBytes) {
      bytes[1] |= proto::flag::kEcn;  // the flags byte of the ATP header
      ++link.counters.ecn_marked;
    }
    link.busy_until = start + static_cast<Time>(static_cast<double>(bytes.size()) / bytes_per_ns);
  }
  Time arrive = link.busy_until > now_ ? link.busy_until + spec.delay : now_ + spec.delay;
  if (rng_.chance(spec.reorder)) {
    arrive += 1 + static_cast<Time>(rng_.below(static_cast<std::uint64_t>(spec.reorder_delay)));
    ++link.counters.reordered;
  }
  if (rng_.chance(spec.duplicate)) {
    ++link.counters.duplicated;
    const Time later = arrive + 1 + static_cast<Time>(rng_.below(
                                        static_cast<std::uint64_t>(spec.reorder_delay) + 1));
    schedule(later, to, from, false, bytes);
  }
  schedule(arrive, to, from, false, std::move(bytes));
}

void Simulator::arm_timer(NodeId node, Time at) {
  at = std::max(at, now_);
  if (armed_[node] == at) return;
  armed_[node] = at;
  schedule(at, node, node, true, {});
}

void Simulator::schedule(Time at, NodeId node, NodeId from, bool is_timer,
                         std::vector<std::uint8_t> bytes) {
  heap_.push_back(Event{at, order_++, node, from, is_timer, std::move(bytes)});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

bool Simulator::step() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    Event e = std::move(heap_.back());
    heap_.pop_back();
    // A timer that was re-armed for another time is stale.
    if (e.is_timer && armed_[e.node] != e.at) continue;
    now_ = e.at;
    ++events_;
    record(e);
    if (e.is_timer) {
      armed_[e.node] = -1;
      nodes_[e.node]->timer(*this);
    } else {
      nodes_[e.node]->receive(*this, e.from, e.bytes);
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
  std::uint64_t h = trace_hash_;
  h = fnv1a(h, &e.at, sizeof e.at);
  h = fnv1a(h, &e.node, sizeof e.node);
  h = fnv1a(h, &e.from, sizeof e.from);
  h = fnv1a(h, e.bytes.data(), std::min(e.bytes.size(), proto::kHeaderBytes));
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
    t.ecn_marked += link.counters.ecn_marked;
    t.filtered += link.counters.filtered;
  }
  return t;
}

}  // namespace atp::sim
