#pragma once
// Retransmission timeout from measured round trips (RFC 6298: smoothed RTT + 4 x variance).
// A worker's round trip includes waiting for the job's slowest worker, so the minimum matters.
#include "engines/common.h"

namespace atp::engines {

class RttEstimator {
 public:
  RttEstimator(Duration initial_rto, Duration min_rto, Duration max_rto);

  void sample(Duration rtt);
  // The current retransmission timeout. It is not backed off as a whole: the worker backs off
  // each fragment's own timer by its timeouts (random loss is not a wrong estimate).
  Duration rto() const { return rto_; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  bool has_sample() const { return has_sample_; }

 private:
  Duration min_rto_, max_rto_, rto_;
  Duration srtt_ = 0, rttvar_ = 0;
  bool has_sample_ = false;
};

}  // namespace atp::engines
