#pragma once
// A peer on a Unix socket that takes connections and never answers them, as a daemon stopped
// with SIGSTOP looks to its callers; or, with `trickle`, answers one byte every 50 ms to each.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace atp::testing {

inline sockaddr_un unix_socket_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  return a;
}

class StuckPeer {
 public:
  StuckPeer(std::string path, bool trickle) : path_(std::move(path)) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = unix_socket_address(path_);
    ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    thread_ = std::thread([this, trickle] {
      std::vector<int> clients;
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0) {
          clients.push_back(::accept(fd_, nullptr, nullptr));
          ++accepted_;
        }
        if (trickle)
          for (int c : clients) ::send(c, " ", 1, MSG_NOSIGNAL);
      }
      for (int c : clients) ::close(c);
    });
  }
  ~StuckPeer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  StuckPeer(const StuckPeer&) = delete;
  StuckPeer& operator=(const StuckPeer&) = delete;
  int accepted() const { return accepted_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

}  // namespace atp::testing
