#pragma once
// Retransmission timeout from measured round trips (RFC 6298: smoothed RTT + 4 x variance,
// the variance term at least min_rto, as Linux's TCP keeps it). A worker's round trip includes
// waiting for the job's slowest worker, so the minimum matters.
#include "engines/common.h"

namespace atp::engines {

class RttEstimator {
 public:
  RttEstimator(Duration initial_rto, Duration min_rto, Duration max_rto);

  void sample(Duration rtt);
  // Forgets every sample: the next one starts the estimate afresh (RFC 6298's first sample).
  // rto() stays as it is until then.
  void restart();
  // The current retransmission timeout. It is not backed off as a whole: the worker backs off
  // each fragment's own timer by its timeouts (random loss is not a wrong estimate).
  Duration rto() const { return rto_; }
  Duration srtt() const { return srtt_; }
  Duration rttvar() const { return rttvar_; }
  // The least round trip of the last kMinRttSamples to twice as many samples: the path's delay
  // with its current queues, but without waiting for the job's slowest worker or for another
  // worker's loss to be recovered (which loss makes srtt include). Recent, not all-time: a
  // queue that builds up raises it, or every wait measured in it would run out too early.
  Duration min_rtt() const { return min_rtt_; }
  static constexpr unsigned kMinRttSamples = 128;
  bool has_sample() const { return has_sample_; }

 private:
  Duration min_rto_, max_rto_, rto_;
  Duration srtt_ = 0, rttvar_ = 0, min_rtt_ = 0;
  Duration bucket_min_ = 0, previous_bucket_min_ = 0;
  unsigned samples_in_bucket_ = 0;
  bool has_sample_ = false;
};

}  // namespace atp::engines
