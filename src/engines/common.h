#pragma once
// What every engine shares: the caller's clock, node addressing and the outbox engines fill.
//
// Engines are sans-IO: they never read a clock, sleep, or touch a socket. The caller passes
// `now` in, and moves the datagrams an engine queued in its Outbox to wherever NodeIds lead
// (a UDP address in the daemons, a simulated link in the simulator, a vector in tests).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace atp {

// Nanoseconds on the caller's clock; only differences matter to the engines.
using Time = std::int64_t;
using Duration = std::int64_t;
inline constexpr Duration kMicrosecond = 1'000;
inline constexpr Duration kMillisecond = 1'000'000;
inline constexpr Duration kSecond = 1'000'000'000;

// The run handshake's timing (protocol.md §7.1): a worker repeats an unanswered join at least
// this often, and PS 0 counts a join toward its launch for three times as long, so the join of
// a worker that died while its launch was starting stops counting.
inline constexpr Duration kJoinRepeatAtMost = 1 * kSecond;
inline constexpr Duration kJoinCountsFor = 3 * kJoinRepeatAtMost;

// A job's ring: the seqs each worker tracks at once, holes included, at least its window (the
// fragments in flight, one aggregator lane each). A longer ring lets a job keep sending past
// fragments waiting for loss recovery (engines.md §3.6); the PS keeps two entries per ring slot.
// 0 in a config: kRingPerWindow windows, at most kMaxRing.
inline constexpr std::uint32_t kRingPerWindow = 16;
inline constexpr std::uint32_t kMaxRing = 1u << 20;
// A configured ring: 0 (the default), or a power of two from `window` up to kMaxRing.
inline bool valid_ring(std::uint32_t window, std::uint32_t ring) {
  return ring == 0 || ((ring & (ring - 1)) == 0 && ring >= window && ring <= kMaxRing);
}
inline std::uint32_t ring_or_default(std::uint32_t window, std::uint32_t ring) {
  if (ring != 0) return ring;
  return window >= kMaxRing / kRingPerWindow ? kMaxRing : window * kRingPerWindow;
}

// An endpoint as the engines see it; the caller maps it to an address.
using NodeId = std::uint32_t;
// A sender the caller could not map to any node (a stranger): never allowed to speak for a job.
inline constexpr NodeId kUnknownNode = ~NodeId{0};

struct Datagram {
  NodeId to = 0;
  std::vector<std::uint8_t> bytes;
};

// Datagrams an engine wants sent. Buffers are reused across clear() calls, so a steady-state
// engine allocates nothing per packet.
class Outbox {
 public:
  std::span<std::uint8_t> add(NodeId to, std::size_t size) {
    if (used_ == items_.size()) items_.emplace_back();
    Datagram& d = items_[used_++];
    d.to = to;
    d.bytes.resize(size);
    return d.bytes;
  }
  std::span<Datagram> packets() { return {items_.data(), used_}; }
  std::size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }
  void clear() { used_ = 0; }

 private:
  std::vector<Datagram> items_;
  std::size_t used_ = 0;
};

// Serial-number comparison (RFC 1982 style) for 32-bit sequence numbers that wrap.
inline std::int32_t seq_distance(std::uint32_t later, std::uint32_t earlier) {
  return static_cast<std::int32_t>(later - earlier);
}

}  // namespace atp
