#pragma once
// A deterministic discrete-event network simulator. Nodes exchange byte buffers over
// directed links with a rate, a propagation delay, a drop-tail queue whose depth a switch reads
// to mark ECN at egress, and random loss, reordering and duplication, all drawn from one seeded generator.
// Events at the same time run in the order they were scheduled, so a seed fixes the whole run;
// trace_hash() fingerprints it.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engines/common.h"
#include "workload/rng.h"

namespace atp::sim {

struct LinkSpec {
  double gbps = 100;                     // 0: infinitely fast
  // What a packet takes on the wire beyond its bytes here (the ATP packet or a ring chunk):
  // Ethernet, IPv4 and UDP headers, FCS, preamble and gap are 66 (docs/p4.md's goodput model).
  std::size_t frame_bytes = 0;
  Duration delay = 1 * kMicrosecond;     // propagation
  std::size_t queue_bytes = 4 << 20;     // drop-tail limit
  std::size_t ecn_bytes = 256 << 10;     // a switch marks ECN when the queue is above this
  double loss = 0;                       // probability per packet
  double duplicate = 0;
  double reorder = 0;                    // probability a packet is held back ...
  Duration reorder_delay = 20 * kMicrosecond;  // ... by up to this long
};

class Simulator;

class Node {
 public:
  virtual ~Node() = default;
  // `bytes` belongs to the simulator and is reused after the call returns.
  virtual void receive(Simulator& sim, NodeId from, std::span<std::uint8_t> bytes) = 0;
  virtual void timer(Simulator&) {}
};

struct LinkCounters {
  std::uint64_t sent = 0, lost = 0, tail_dropped = 0, duplicated = 0, reordered = 0,
                filtered = 0;
};

class Simulator {
 public:
  // Tests use this to drop chosen packets: return true to drop.
  using DropFilter = std::function<bool(NodeId from, NodeId to, std::span<const std::uint8_t>)>;

  explicit Simulator(std::uint64_t seed);

  NodeId add_node(std::unique_ptr<Node> node);
  void connect(NodeId a, NodeId b, const LinkSpec& spec);  // both directions

  // Copies `bytes` onto the link from `from` to `to`.
  void send(NodeId from, NodeId to, std::span<const std::uint8_t> bytes);
  // Asks for node.timer() at `at`; a later call for the same node replaces the earlier one.
  // (A replaced timer may still call node.timer() once early, which nodes must tolerate.)
  void arm_timer(NodeId node, Time at);
  // Whether the queue of the link from `from` to `to` is above its ECN threshold now: what a
  // switch's egress reads as queue depth.
  bool queue_above_ecn(NodeId from, NodeId to) const;
  void set_drop_filter(DropFilter filter) { drop_filter_ = std::move(filter); }

  // Runs one event; false when none is left.
  bool step();
  bool idle() const { return heap_.empty(); }
  // Runs until no event is left, `until` is passed, or `stop()` returns true.
  void run(Time until, const std::function<bool()>& stop = {});

  Time now() const { return now_; }
  std::uint64_t events() const { return events_; }
  std::uint64_t trace_hash() const { return trace_hash_; }
  LinkCounters link_totals() const;

 private:
  struct Link {
    LinkSpec spec;
    Time busy_until = 0;
    LinkCounters counters;
  };
  static constexpr std::uint32_t kTimer = ~0u;
  struct Event {
    Time at;
    std::uint64_t order;
    NodeId node;
    NodeId from;
    std::uint32_t packet;  // index into packets_, or kTimer
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.order > b.order;
    }
  };

  std::size_t queued_bytes(const Link& link) const;
  void schedule(Time at, NodeId node, NodeId from, std::uint32_t packet);
  std::uint32_t store(std::span<const std::uint8_t> bytes);
  void record(const Event& e);
  static std::uint64_t key(NodeId from, NodeId to) { return (std::uint64_t{from} << 32) | to; }

  workload::Rng rng_;
  Time now_ = 0;
  std::uint64_t order_ = 0, events_ = 0, trace_hash_ = 0xcbf29ce484222325ull;
  std::vector<std::unique_ptr<Node>> nodes_;
  // Per node: when it wants its timer, and the one timer event in the heap that counts
  // (-1: none). Moving a timer later reuses the queued event instead of adding one.
  std::vector<Time> timer_wanted_, timer_scheduled_;
  std::unordered_map<std::uint64_t, Link> links_;
  std::vector<Event> heap_;  // a binary heap under Later
  // Packets in flight, in reused buffers: no allocation per packet once warmed up.
  std::vector<std::vector<std::uint8_t>> packets_;
  std::vector<std::uint32_t> free_packets_;
  DropFilter drop_filter_;
};

}  // namespace atp::sim
