#include "engines/worker/rtt_estimator.h"

#include <algorithm>

namespace atp::engines {

RttEstimator::RttEstimator(Duration initial_rto, Duration min_rto, Duration max_rto)
    : min_rto_(min_rto), max_rto_(max_rto), rto_(std::clamp(initial_rto, min_rto, max_rto)) {}

void RttEstimator::sample(Duration rtt) {
  rtt = std::max<Duration>(rtt, 1);
  // Two buckets of kMinRttSamples: the minimum spans the last one to two buckets' samples.
  if (!has_sample_ || samples_in_bucket_ == kMinRttSamples) {
    previous_bucket_min_ = has_sample_ ? bucket_min_ : rtt;
    bucket_min_ = rtt;
    samples_in_bucket_ = 0;
  }
  bucket_min_ = std::min(bucket_min_, rtt);
  ++samples_in_bucket_;
  min_rtt_ = std::min(bucket_min_, previous_bucket_min_);
  if (!has_sample_) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
    has_sample_ = true;
  } else {
    const Duration err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + rtt) / 8;
  }
  // The floor is a margin above the smoothed round trip, not a floor under the whole timer
  // (as Linux's TCP keeps rttvar at rto_min / 4 at least): a worker's own window standing in
  // its queues makes the round trip long and steady, so srtt + 4 x rttvar is barely above it,
  // and any queue that builds a little more fired every fragment's timer at once; each resend
  // leaves the switches' aggregation for the PS (one packet per worker per seq), which built
  // the queue further (random scenarios: lossless runs at 0.1-0.3 of static slices, 10^5
  // resends without a loss; docs/simulator.md).
  rto_ = std::clamp(srtt_ + std::max(4 * rttvar_, min_rto_), min_rto_, max_rto_);
}

void RttEstimator::restart() {
  srtt_ = rttvar_ = min_rtt_ = bucket_min_ = previous_bucket_min_ = 0;
  samples_in_bucket_ = 0;
  has_sample_ = false;
}

}  // namespace atp::engines
