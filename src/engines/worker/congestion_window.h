#pragma once
// AIMD congestion window in fragments: +1 per round trip of unmarked results, halved on an ECN
// mark or a loss, at most once per round trip (until a fragment sent after the cut is acked).
#include <cstdint>

namespace atp::engines {

class CongestionWindow {
 public:
  CongestionWindow(double initial, double maximum);

  // A result arrived for `seq`; `next_seq` is the next fragment not yet sent.
  void on_result(bool ecn, std::uint32_t seq, std::uint32_t next_seq);
  void on_loss(std::uint32_t seq, std::uint32_t next_seq);

  // Fragments that may be in flight now (at least 1).
  std::uint32_t allowed() const { return static_cast<std::uint32_t>(window_); }
  double value() const { return window_; }
  std::uint64_t decreases() const { return decreases_; }

 private:
  void decrease(std::uint32_t next_seq);

  double window_, maximum_;
  // No further cut until a result for a fragment at or past this seq arrives.
  std::uint32_t recovery_seq_ = 0;
  bool in_recovery_ = false;
  std::uint64_t decreases_ = 0;
};

}  // namespace atp::engines
