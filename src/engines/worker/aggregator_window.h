#pragma once
// The worker's aggregator window (A2TP-style, optional): how many fragments may be in flight
// given how often this job's seqs meet busy aggregators. It reacts to the share of collided
// results the way DCTCP reacts to the share of ECN marks: per round (a window's worth of
// results) alpha <- (1 - g) alpha + g F, F the round's collided share; a round with any
// collision cuts the window to W (1 - alpha / 2), a clean round adds 1. The worker keeps it
// under its congestion window.
#include <cstdint>

namespace atp::engines {

class AggregatorWindow {
 public:
  AggregatorWindow(double initial, double maximum);

  void on_result(bool collided);
  void cap(double limit);  // never above `limit` (at least 1)
  std::uint32_t allowed() const { return static_cast<std::uint32_t>(window_); }
  double value() const { return window_; }
  double collided_share() const { return alpha_; }

 private:
  double window_, maximum_, alpha_ = 0;
  std::uint32_t results_ = 0, collided_ = 0;  // this round's
};

}  // namespace atp::engines
