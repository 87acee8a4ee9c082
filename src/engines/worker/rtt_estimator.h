#pragma once
// Retransmission timeout from measured round trips (RFC 6298: smoothed RTT + 4 x variance).
// A worker's round trip includes waiting for the job's slowest worker, so the minimum matters.
#include "engines/common.h"

namespace atp::engines {

class RttEstimator {
 public:
  RttEstimator(Duration initial_rto, Duration min_rto, Duration max_rto);

  void sample(Duration rtt);
  // Timeout for a fragment sent `retransmits` times before: doubled per retransmission.
  Duration rto(unsigned retransmits = 0) const;
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  bool has_sample() const { return has_sample_; }

 private:
  Duration min_rto_, max_rto_, rto_;
  Duration srtt_ = 0, rttvar_ = 0;
  bool has_sample_ = false;
};

}  // namespace atp::engines
