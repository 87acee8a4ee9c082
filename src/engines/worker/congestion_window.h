#pragma once
// The worker's congestion window in fragments, the paper's AIMD on ECN: slow start (+1 per
// unmarked result) up to ssthresh, then +1 per window of unmarked results; halved on an ECN
// mark, at most once per round trip (until a fragment sent after the cut is acked), and
// ssthresh set to the halved window. Loss does not cut it, found by a timeout or otherwise:
// every element of the fabric marks its queues, and in a job a worker's silence is as often
// another worker's recovery as its own loss (docs/engines.md §3.6-3.7 give the measurements).
#include <cstdint>

#include "engines/common.h"

namespace atp::engines {

class CongestionWindow {
 public:
  // `enabled` false: the window stays at `maximum` (a baseline without congestion control).
  CongestionWindow(double initial, double maximum, bool enabled = true);

  // A result arrived for `seq`; `next_seq` is the next fragment not yet sent. Inline: it runs
  // for every result, and at the ceiling, unmarked and out of recovery it does nothing.
  void on_result(bool ecn, std::uint32_t seq, std::uint32_t next_seq) {
    if (!enabled_) return;
    leave_recovery_after(seq);
    if (ecn) {
      decrease(next_seq);
      return;
    }
    if (window_ < maximum_) grow();
  }

  // Fragments that may be in flight now (at least 1).
  std::uint32_t allowed() const { return static_cast<std::uint32_t>(window_); }
  double value() const { return window_; }
  double slow_start_threshold() const { return ssthresh_; }
  std::uint64_t decreases() const { return decreases_; }

 private:
  void leave_recovery_after(std::uint32_t seq) {
    if (in_recovery_ && seq_distance(seq, recovery_seq_) >= 0) in_recovery_ = false;
  }
  void grow();
  void decrease(std::uint32_t next_seq);

  double window_, maximum_, ssthresh_;
  bool enabled_;
  // No further cut until a result for a fragment at or past this seq arrives.
  std::uint32_t recovery_seq_ = 0;
  bool in_recovery_ = false;
  std::uint64_t decreases_ = 0;
};

}  // namespace atp::engines
