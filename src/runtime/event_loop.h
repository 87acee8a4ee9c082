#pragma once
// A single-threaded epoll loop: readable file descriptors, one-shot timers (timerfd, on
// CLOCK_MONOTONIC), a wake-up from other threads (eventfd) and SIGINT/SIGTERM (signalfd).
#include <atomic>
#include <functional>
#include <vector>

#include "engines/common.h"

namespace atp::runtime {

// Nanoseconds on CLOCK_MONOTONIC: the `now` the engines receive.
Time monotonic_now();

class EventLoop {
 public:
  using Callback = std::function<void()>;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void watch(int fd, Callback on_readable);
  // A timer that calls `on_fire` once at each time given to arm().
  int add_timer(Callback on_fire);
  void arm(int timer, Time at);
  void disarm(int timer);
  // SIGINT and SIGTERM stop the loop (they are blocked for the process, then read here).
  void stop_on_signals();
  // Runs `on_wake` in the loop soon after wake() is called from any thread.
  void on_wake(Callback on_wake);
  void wake();

  void run();   // until stop()
  void stop() { stopping_ = true; }
  bool stopping() const { return stopping_; }
  bool stopped_by_signal() const { return signalled_; }

 private:
  int epoll_ = -1, signal_fd_ = -1, wake_fd_ = -1;
  std::vector<std::pair<int, Callback>> watched_;
  std::vector<std::pair<int, Callback>> timers_;  // timerfd, callback
  Callback on_wake_;
  std::atomic<bool> stopping_{false};
  bool signalled_ = false;
};

}  // namespace atp::runtime
