#include "engines/worker/rtt_estimator.h"

#include <algorithm>

namespace atp::engines {

RttEstimator::RttEstimator(Duration initial_rto, Duration min_rto, Duration max_rto)
    : min_rto_(min_rto), max_rto_(max_rto), rto_(std::clamp(initial_rto, min_rto, max_rto)) {}

void RttEstimator::sample(Duration rtt) {
  rtt = std::max<Duration>(rtt, 1);
  if (!has_sample_) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
    has_sample_ = true;
  } else {
    const Duration err = rtt > srtt_ ? rtt - srtt_ : srtt_ - rtt;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + rtt) / 8;
  }
  rto_ = std::clamp(srtt_ + 4 * rttvar_, min_rto_, max_rto_);
}


}  // namespace atp::engines
