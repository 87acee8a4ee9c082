#pragma once
// How many fragments beyond its plan's cap a worker may have out. The cap keeps every seq's
// aggregator free of the job's own earlier seqs, which is all a static slice gets; a fragment
// past it meets its own job's aggregator and goes on to the PS, whose link may have room.
// The allowance grows by 1 / (8 + allowance) per result neither marked ECN nor collided (a few
// per round of results while small, slower as it grows); a collided result takes one back (the
// excess met its own job's seq: that fragment's contribution went to the PS), and an ECN mark
// halves it (the PS link queues, as the congestion window reads it). It is withheld for a while
// after any resend: loss leaves partial sums in the home's aggregators, and an excess running
// into them delays their flushes. Only ever within the job's home: it never takes an aggregator
// another job was given. docs/sharing.md measures the rules against the alternatives tried.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "engines/common.h"

namespace atp::engines {

// Smoothed round trips after a resend during which the allowance stays at zero.
inline constexpr std::int64_t kAllowanceQuietRounds = 40;

class CapAllowance {
 public:
  void on_result(bool ecn_marked, bool collided) {
    if (ecn_marked)
      value_ /= 2;
    else if (collided)
      value_ = std::max(0.0, value_ - 1);
    else
      value_ += 1 / (8 + value_);
  }
  void on_resend(Time now) { last_resend_ = now; }
  // Fragments allowed beyond the cap now.
  std::uint32_t extra(Time now, Duration srtt) const {
    if (last_resend_ && now - *last_resend_ < kAllowanceQuietRounds * srtt) return 0;
    return static_cast<std::uint32_t>(value_);
  }
  double value() const { return value_; }

 private:
  double value_ = 0;
  std::optional<Time> last_resend_;
};

}  // namespace atp::engines
