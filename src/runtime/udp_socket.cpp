#include "runtime/udp_socket.h"

#include <linux/sock_diag.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace atp::runtime {

namespace {
constexpr int kEct0 = 0x02;          // the ECN field: ECN-capable transport, codepoint 0
constexpr std::uint8_t kCe = 0x03;   // Congestion Experienced
constexpr std::uint8_t kEcnMask = 0x03;
constexpr std::size_t kReceiveControlBytes = 2 * CMSG_SPACE(sizeof(int));  // TOS, GRO size
constexpr std::size_t kSendControlBytes = CMSG_SPACE(sizeof(std::uint16_t));  // GSO size
// A GSO train: at most 64 segments (UDP_MAX_SEGMENTS on older kernels) in one IPv4 datagram.
constexpr std::size_t kMaxSegments = 64;
constexpr std::size_t kMaxTrainBytes = 65507;

bool same_destination(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

bool environment_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}
}  // namespace

SocketOptions SocketOptions::from_environment() {
  return {.send_trains = !environment_is("ATP_NO_GSO", "1"),
          .receive_trains = !environment_is("ATP_UDP_GRO", "0")};
}

ReceiveBatch::ReceiveBatch(std::size_t capacity, std::size_t max_bytes)
    : buffers_(capacity, std::vector<std::uint8_t>(max_bytes)), addresses_(capacity),
      controls_(capacity, std::vector<std::uint8_t>(kReceiveControlBytes)),
      congestion_experienced_(capacity), iovecs_(capacity), headers_(capacity) {
  for (std::size_t i = 0; i < capacity; ++i) {
    iovecs_[i] = {buffers_[i].data(), max_bytes};
    headers_[i] = {};
    headers_[i].msg_hdr.msg_iov = &iovecs_[i];
    headers_[i].msg_hdr.msg_iovlen = 1;
    headers_[i].msg_hdr.msg_name = &addresses_[i];
  }
  datagrams_.reserve(capacity);
}

void ReceiveBatch::unpack(std::size_t m, std::size_t length) {
  msghdr& h = headers_[m].msg_hdr;
  std::uint8_t tos = 0;
  int segment = 0;  // a GRO train's datagram size (the last may be shorter)
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) tos = *CMSG_DATA(c);
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO)
      std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
  }
  congestion_experienced_[m] = (tos & kEcnMask) == kCe;
  const auto message = static_cast<std::uint32_t>(m);
  if (segment <= 0 || static_cast<std::size_t>(segment) >= length) {
    datagrams_.push_back({message, 0, static_cast<std::uint32_t>(length)});
    return;
  }
  for (std::size_t offset = 0; offset < length; offset += static_cast<std::size_t>(segment)) {
    const std::size_t size = std::min<std::size_t>(static_cast<std::size_t>(segment), length - offset);
    datagrams_.push_back({message, static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(size)});
  }
}

void SendBatch::add(const Endpoint& to, std::span<const std::uint8_t> bytes) {
  if (copies_used_ == copies_.size()) copies_.emplace_back();
  std::vector<std::uint8_t>& copy = copies_[copies_used_++];
  copy.assign(bytes.begin(), bytes.end());
  add_borrowed(to, copy);
}

void SendBatch::add_borrowed(const Endpoint& to, std::span<const std::uint8_t> bytes) {
  datagrams_.push_back(bytes);
  addresses_.push_back(to.sockaddr());
}

UdpSocket::UdpSocket(const Endpoint& local, SocketOptions options) {
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
  // Trains out (GSO), and in (GRO) if asked: a kernel without UDP_GRO just delivers datagrams
  // one by one.
  gso_ = options.send_trains;
  if (options.receive_trains) ::setsockopt(fd_, SOL_UDP, UDP_GRO, &on, sizeof on);
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

UdpSocket::UdpSocket(UdpSocket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), gso_(o.gso_), headers_(std::move(o.headers_)),
      iovecs_(std::move(o.iovecs_)), controls_(std::move(o.controls_)),
      segments_(std::move(o.segments_)), order_(std::move(o.order_)),
      group_of_(std::move(o.group_of_)), destinations_(std::move(o.destinations_)),
      counters_(o.counters_) {}

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
  batch.datagrams_.clear();
  const int n = ::recvmmsg(fd_, batch.headers_.data(), static_cast<unsigned>(batch.headers_.size()),
                           MSG_DONTWAIT, nullptr);
  for (int i = 0; i < n; ++i) {
    const std::size_t before = batch.datagrams_.size();
    batch.unpack(static_cast<std::size_t>(i), batch.headers_[i].msg_len);
    const std::size_t datagrams = batch.datagrams_.size() - before;
    counters_.trains_received += datagrams > 1;
    if (batch.congestion_experienced_[i]) counters_.congestion_experienced += datagrams;
  }
  counters_.received += batch.datagrams_.size();
  return batch.datagrams_.size();
}

// The order datagrams leave in: grouped by destination, each destination's in the order they
// were added (a switch's multicast fan-out alternates destinations; grouped, each worker's
// results form trains). Order across destinations means nothing to UDP. Without GSO, or with
// more destinations than a batch is worth grouping, as added.
void UdpSocket::order_by_destination(const SendBatch& batch) {
  const std::size_t n = batch.datagrams_.size();
  order_.resize(n);
  destinations_.clear();
  group_of_.resize(n);
  for (std::size_t i = 0; gso_ && i < n && destinations_.size() <= kMaxSegments; ++i) {
    std::size_t d = 0;
    while (d < destinations_.size() && !same_destination(batch.addresses_[destinations_[d].first],
                                                         batch.addresses_[i]))
      ++d;
    if (d == destinations_.size()) destinations_.push_back({i, 0});
    ++destinations_[d].second;
    group_of_[i] = d;
  }
  if (!gso_ || destinations_.size() > kMaxSegments) {
    for (std::size_t i = 0; i < n; ++i) order_[i] = i;
    return;
  }
  std::size_t position = 0;  // a destination's count becomes its next free position
  for (auto& [first, count] : destinations_) {
    const std::size_t datagrams = count;
    count = position;
    position += datagrams;
  }
  for (std::size_t i = 0; i < n; ++i) order_[destinations_[group_of_[i]].second++] = i;
}

// Plans sendmmsg messages for the datagrams from position `from` on (in `order_`): a run of
// datagrams to one destination, all as long as the first but the last (which may be shorter),
// becomes one GSO train. Returns the number of messages; segments_[m] says how many datagrams
// each holds.
std::size_t UdpSocket::plan_messages(SendBatch& batch, std::size_t from) {
  const std::size_t n = batch.datagrams_.size();
  std::size_t messages = 0;
  for (std::size_t i = from; i < n; ++messages) {
    const std::size_t size = iovecs_[i].iov_len;
    std::size_t j = i + 1, total = size;
    while (gso_ && j < n && j - i < kMaxSegments &&
           same_destination(batch.addresses_[order_[j]], batch.addresses_[order_[i]])) {
      const std::size_t next = iovecs_[j].iov_len;
      if (next > size || next == 0 || total + next > kMaxTrainBytes) break;
      total += next;
      ++j;
      if (next < size) break;  // only a train's last datagram may be shorter
    }
    mmsghdr& h = headers_[messages];
    h = {};
    h.msg_hdr.msg_iov = &iovecs_[i];
    h.msg_hdr.msg_iovlen = j - i;
    h.msg_hdr.msg_name = &batch.addresses_[order_[i]];
    h.msg_hdr.msg_namelen = sizeof(sockaddr_in);
    if (j - i > 1) {
      std::vector<std::uint8_t>& control = controls_[messages];
      h.msg_hdr.msg_control = control.data();
      h.msg_hdr.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&h.msg_hdr);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
      const auto segment = static_cast<std::uint16_t>(size);
      std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
    }
    segments_[messages] = j - i;
    i = j;
  }
  return messages;
}

void UdpSocket::send(SendBatch& batch) {
  const std::size_t n = batch.datagrams_.size();
  if (headers_.size() < n) {
    headers_.resize(n);
    iovecs_.resize(n);
    controls_.resize(n, std::vector<std::uint8_t>(kSendControlBytes));
    segments_.resize(n);
  }
  order_by_destination(batch);
  for (std::size_t p = 0; p < n; ++p) {
    const auto bytes = batch.datagrams_[order_[p]];
    // sendmmsg never writes through the iovec: dropping const here is safe.
    iovecs_[p] = {const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
  }
  std::size_t done = 0;
  while (done < n) {
    const std::size_t messages = plan_messages(batch, done);
    done += send_messages(messages);
  }
  counters_.sent += n;
  batch.clear();
}

void UdpSocket::send(Outbox& outbox, const AddressBook& book, SendBatch& batch) {
  for (auto& d : outbox.packets()) batch.add_borrowed(book.endpoint(d.to), d.bytes);
  send(batch);
  outbox.clear();
}

// One sendmmsg of the planned messages; returns the datagrams it disposed of (sent, or lost
// to an error), 0 when it must be retried.
std::size_t UdpSocket::send_messages(std::size_t messages) {
  ++counters_.send_calls;
  const int sent = ::sendmmsg(fd_, headers_.data(), static_cast<unsigned>(messages), 0);
  if (sent > 0) {
    std::size_t datagrams = 0;
    for (int m = 0; m < sent; ++m) {
      datagrams += segments_[m];
      counters_.trains_sent += segments_[m] > 1;
    }
    return datagrams;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
    pollfd p{fd_, POLLOUT, 0};
    ::poll(&p, 1, 10);
    return 0;
  }
  if (errno == EINTR) return 0;
  // A train the kernel or the path refuses (no GSO, or a datagram beyond the path MTU): send
  // one datagram per message from now on.
  if (segments_[0] > 1 && (errno == EINVAL || errno == EIO || errno == EOPNOTSUPP)) {
    gso_ = false;
    return 0;
  }
  // An unreachable peer (ECONNREFUSED from an earlier ICMP) or similar: this datagram is
  // lost like any other; loss recovery handles it.
  counters_.send_failures += segments_[0];
  return segments_[0];
}

}  // namespace atp::runtime
