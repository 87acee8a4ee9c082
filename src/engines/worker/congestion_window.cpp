#include "engines/worker/congestion_window.h"

#include <algorithm>

#include "engines/common.h"

namespace atp::engines {

CongestionWindow::CongestionWindow(double initial, double maximum)
    : window_(std::clamp(initial, 1.0, maximum)), maximum_(std::max(1.0, maximum)) {}

void CongestionWindow::on_result(bool ecn, std::uint32_t seq, std::uint32_t next_seq) {
  if (in_recovery_ && seq_distance(seq, recovery_seq_) >= 0) in_recovery_ = false;
  if (ecn) {
    decrease(next_seq);
    return;
  }
  window_ = std::min(maximum_, window_ + 1.0 / window_);
}

void CongestionWindow::on_loss(std::uint32_t seq, std::uint32_t next_seq) {
  if (in_recovery_ && seq_distance(seq, recovery_seq_) >= 0) in_recovery_ = false;
  decrease(next_seq);
}

void CongestionWindow::decrease(std::uint32_t next_seq) {
  if (in_recovery_) return;
  window_ = std::max(1.0, window_ / 2);
  recovery_seq_ = next_seq;
  in_recovery_ = true;
  ++decreases_;
}

}  // namespace atp::engines
