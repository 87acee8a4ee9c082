#include "runtime/udp_socket.h"

#include <linux/sock_diag.h>
#include <netinet/ip.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace atp::runtime {

namespace {
constexpr int kEct0 = 0x02;          // the ECN field: ECN-capable transport, codepoint 0
constexpr std::uint8_t kCe = 0x03;   // Congestion Experienced
constexpr std::uint8_t kEcnMask = 0x03;
constexpr std::size_t kControlBytes = CMSG_SPACE(sizeof(int));
}  // namespace

ReceiveBatch::ReceiveBatch(std::size_t capacity, std::size_t max_bytes)
    : buffers_(capacity, std::vector<std::uint8_t>(max_bytes)), addresses_(capacity),
      controls_(capacity, std::vector<std::uint8_t>(kControlBytes)),
      congestion_experienced_(capacity), iovecs_(capacity), headers_(capacity),
      lengths_(capacity) {
  for (std::size_t i = 0; i < capacity; ++i) {
    iovecs_[i] = {buffers_[i].data(), max_bytes};
    headers_[i] = {};
    headers_[i].msg_hdr.msg_iov = &iovecs_[i];
    headers_[i].msg_hdr.msg_iovlen = 1;
    headers_[i].msg_hdr.msg_name = &addresses_[i];
  }
}

void ReceiveBatch::read_ecn(std::size_t i) {
  msghdr& m = headers_[i].msg_hdr;
  std::uint8_t tos = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
  congestion_experienced_[i] = (tos & kEcnMask) == kCe;
}

void SendBatch::add(const Endpoint& to, std::span<const std::uint8_t> bytes) {
  if (count_ == buffers_.size()) {
    buffers_.emplace_back();
    addresses_.emplace_back();
  }
  buffers_[count_].assign(bytes.begin(), bytes.end());
  addresses_[count_] = to.sockaddr();
  ++count_;
}

UdpSocket::UdpSocket(const Endpoint& local) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "socket");
  const int buffer = 8 << 20;  // room for bursts of a whole window from many workers
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  // ECT(0) on everything sent, and the TOS byte of everything received (IP_RECVTOS): without
  // them a marking queue would have to drop. Linux lets UDP set the ECN bits through IP_TOS.
  const int ect0 = kEct0, on = 1;
  ::setsockopt(fd_, IPPROTO_IP, IP_TOS, &ect0, sizeof ect0);
  ::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
  const sockaddr_in a = local.sockaddr();
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::system_error(e, std::generic_category(), "bind " + local.str());
  }
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) ::close(fd_);
}

Endpoint UdpSocket::local() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  return Endpoint::from(a);
}

SocketBacklog UdpSocket::backlog() const {
  std::uint32_t info[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, info, &len) != 0) return {};
  return {info[SK_MEMINFO_RMEM_ALLOC], info[SK_MEMINFO_WMEM_ALLOC]};
}

std::size_t UdpSocket::receive(ReceiveBatch& batch) {
  for (std::size_t i = 0; i < batch.headers_.size(); ++i) {
    msghdr& m = batch.headers_[i].msg_hdr;
    m.msg_namelen = sizeof(sockaddr_in);
    m.msg_control = batch.controls_[i].data();
    m.msg_controllen = batch.controls_[i].size();
  }
  ++counters_.receive_calls;
  const int n = ::recvmmsg(fd_, batch.headers_.data(), static_cast<unsigned>(batch.headers_.size()),
                           MSG_DONTWAIT, nullptr);
  if (n <= 0) {
    batch.count_ = 0;
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    batch.lengths_[i] = batch.headers_[i].msg_len;
    batch.read_ecn(static_cast<std::size_t>(i));
    counters_.congestion_experienced += batch.congestion_experienced_[i];
  }
  batch.count_ = static_cast<std::size_t>(n);
  counters_.received += batch.count_;
  return batch.count_;
}

void UdpSocket::send(SendBatch& batch) {
  const std::size_t n = batch.count_;
  if (headers_.size() < n) {
    headers_.resize(n);
    iovecs_.resize(n);
  }
  for (std::size_t i = 0; i < n; ++i) {
    iovecs_[i] = {batch.buffers_[i].data(), batch.buffers_[i].size()};
    headers_[i] = {};
    headers_[i].msg_hdr.msg_iov = &iovecs_[i];
    headers_[i].msg_hdr.msg_iovlen = 1;
    headers_[i].msg_hdr.msg_name = &batch.addresses_[i];
    headers_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
  }
  std::size_t done = 0;
  while (done < n) {
    ++counters_.send_calls;
    const int sent = ::sendmmsg(fd_, headers_.data() + done, static_cast<unsigned>(n - done), 0);
    if (sent > 0) {
      done += static_cast<std::size_t>(sent);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 10);
      continue;
    }
    if (errno == EINTR) continue;
    // An unreachable peer (ECONNREFUSED from an earlier ICMP) or similar: this datagram is
    // lost like any other; loss recovery handles it.
    ++counters_.send_failures;
    ++done;
  }
  counters_.sent += n;
  batch.clear();
}

}  // namespace atp::runtime
