#pragma once
// A single-threaded epoll loop: readable file descriptors, one-shot timers (timerfd, on
// CLOCK_MONOTONIC), a wake-up from other threads (eventfd) and SIGINT/SIGTERM (signalfd).
#include <atomic>
#include <cstdint>
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
  // Stops watching `fd` (before the caller closes it). Events already read for it this round
  // are dropped, even if its slot is taken again meanwhile.
  void unwatch(int fd);
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
  void unwatch_slot(std::uint32_t slot);
  void dispatch(std::uint64_t event);

  int epoll_ = -1, signal_fd_ = -1, wake_fd_ = -1;
  struct Watched {
    int fd = -1;
    std::uint32_t generation = 0;  // tells a reused slot from the one an old event names
    Callback on_readable;
  };
  std::vector<Watched> watched_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::pair<int, Callback>> timers_;  // timerfd, callback
  Callback on_wake_;
  std::atomic<bool> stopping_{false};
  bool signalled_ = false;
};

}  // namespace atp::runtime
