#include "runtime/event_loop.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace atp::runtime {

namespace {

void check(int result, const char* what) {
  if (result < 0) throw std::system_error(errno, std::generic_category(), what);
}

void drain(int fd) {
  std::uint64_t value;
  while (::read(fd, &value, sizeof value) > 0) {
  }
}

}  // namespace

Time monotonic_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return Time{ts.tv_sec} * kSecond + ts.tv_nsec;
}

EventLoop::EventLoop() {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  check(epoll_, "epoll_create1");
}

EventLoop::~EventLoop() {
  for (auto& [fd, cb] : timers_) ::close(fd);
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  ::close(epoll_);
}

void EventLoop::watch(int fd, Callback on_readable) {
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(watched_.size());
    watched_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Watched& w = watched_[slot];
  w.fd = fd;
  w.on_readable = std::move(on_readable);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = (std::uint64_t{w.generation} << 32) | slot;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int e = errno;
    unwatch_slot(slot);
    throw std::system_error(e, std::generic_category(), "epoll_ctl");
  }
}

void EventLoop::unwatch(int fd) {
  for (std::uint32_t slot = 0; slot < watched_.size(); ++slot)
    if (watched_[slot].fd == fd) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
      unwatch_slot(slot);
      return;
    }
}

void EventLoop::unwatch_slot(std::uint32_t slot) {
  Watched& w = watched_[slot];
  w.fd = -1;
  w.on_readable = nullptr;
  ++w.generation;
  free_slots_.push_back(slot);
}

void EventLoop::dispatch(std::uint64_t event) {
  const auto slot = static_cast<std::uint32_t>(event);
  if (slot >= watched_.size() || watched_[slot].generation != event >> 32) return;
  // A copy: the callback may unwatch (and so destroy) itself.
  const Callback on_readable = watched_[slot].on_readable;
  if (on_readable) on_readable();
}

int EventLoop::add_timer(Callback on_fire) {
  const int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  check(fd, "timerfd_create");
  timers_.emplace_back(fd, std::move(on_fire));
  const int id = static_cast<int>(timers_.size() - 1);
  watch(fd, [this, id] {
    drain(timers_[id].first);
    timers_[id].second();
  });
  return id;
}

void EventLoop::arm(int timer, Time at) {
  itimerspec spec{};
  at = std::max<Time>(at, 1);  // 0 would disarm
  spec.it_value.tv_sec = at / kSecond;
  spec.it_value.tv_nsec = at % kSecond;
  check(::timerfd_settime(timers_[timer].first, TFD_TIMER_ABSTIME, &spec, nullptr),
        "timerfd_settime");
}

void EventLoop::disarm(int timer) {
  itimerspec spec{};
  ::timerfd_settime(timers_[timer].first, 0, &spec, nullptr);
}

void EventLoop::stop_on_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal_fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  check(signal_fd_, "signalfd");
  watch(signal_fd_, [this] {
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof info) > 0) {
    }
    signalled_ = true;
    stop();
  });
}

void EventLoop::on_wake(Callback on_wake) {
  on_wake_ = std::move(on_wake);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  check(wake_fd_, "eventfd");
  watch(wake_fd_, [this] {
    drain(wake_fd_);
    on_wake_();
  });
}

void EventLoop::wake() {
  const std::uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]] auto r = ::write(wake_fd_, &one, sizeof one);
}

void EventLoop::run() {
  epoll_event events[64];
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_, events, 64, 200);
    if (n < 0 && errno != EINTR) check(n, "epoll_wait");
    for (int i = 0; i < n && !stopping_; ++i) dispatch(events[i].data.u64);
  }
}

}  // namespace atp::runtime
