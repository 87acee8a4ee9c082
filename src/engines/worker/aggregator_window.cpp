#include "engines/worker/aggregator_window.h"

#include <algorithm>

namespace atp::engines {

namespace {
constexpr double kGain = 1.0 / 16;  // DCTCP's g
}  // namespace

AggregatorWindow::AggregatorWindow(double initial, double maximum)
    : window_(std::clamp(initial, 1.0, std::max(1.0, maximum))), maximum_(std::max(1.0, maximum)) {}

void AggregatorWindow::on_result(bool collided) {
  ++results_;
  collided_ += collided;
  if (results_ < window_) return;
  alpha_ = (1 - kGain) * alpha_ + kGain * collided_ / results_;
  window_ = collided_ > 0 ? std::max(1.0, window_ * (1 - alpha_ / 2)) : std::min(maximum_, window_ + 1);
  results_ = collided_ = 0;
}

void AggregatorWindow::cap(double limit) { window_ = std::max(1.0, std::min(window_, limit)); }

}  // namespace atp::engines
