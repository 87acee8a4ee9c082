#include "engines/worker/congestion_window.h"

#include <algorithm>

namespace atp::engines {

CongestionWindow::CongestionWindow(double initial, double maximum, bool enabled)
    : maximum_(std::max(1.0, maximum)), ssthresh_(maximum_), enabled_(enabled) {
  window_ = enabled ? std::clamp(initial, 1.0, maximum_) : maximum_;
}

// Slow start adds one per result up to ssthresh, then one per window of results.
void CongestionWindow::grow() {
  const double growth = window_ < ssthresh_ ? 1.0 : 1.0 / window_;
  window_ = std::min(maximum_, window_ + growth);
}

void CongestionWindow::decrease(std::uint32_t next_seq) {
  if (in_recovery_) return;
  window_ = std::max(1.0, window_ / 2);
  ssthresh_ = window_;
  recovery_seq_ = next_seq;
  in_recovery_ = true;
  ++decreases_;
}

}  // namespace atp::engines
