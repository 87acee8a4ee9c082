#pragma once
// A non-blocking UDP socket that moves datagrams in batches (recvmmsg / sendmmsg): one system
// call per batch, not per packet. Everything it sends is ECN-capable (ECT(0)), and it reports
// which datagrams arrived marked Congestion Experienced (RFC 3168), so a queue on the path that
// marks instead of dropping reaches the protocol (docs/engines.md, "ECN on real packets").
#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/endpoint.h"

namespace atp::runtime {

// Receive buffers for up to `capacity` datagrams of up to `max_bytes` each, reused per call.
class ReceiveBatch {
 public:
  ReceiveBatch(std::size_t capacity, std::size_t max_bytes);
  std::size_t size() const { return count_; }
  std::span<std::uint8_t> packet(std::size_t i) { return {buffers_[i].data(), lengths_[i]}; }
  Endpoint from(std::size_t i) const { return Endpoint::from(addresses_[i]); }
  // The IP header's ECN field said CE: a queue on the way was congested.
  bool congestion_experienced(std::size_t i) const { return congestion_experienced_[i] != 0; }

 private:
  friend class UdpSocket;
  void read_ecn(std::size_t i);

  std::vector<std::vector<std::uint8_t>> buffers_;
  std::vector<sockaddr_in> addresses_;
  std::vector<std::vector<std::uint8_t>> controls_;  // ancillary data: the received TOS byte
  std::vector<std::uint8_t> congestion_experienced_;
  std::vector<iovec> iovecs_;
  std::vector<mmsghdr> headers_;
  std::vector<std::size_t> lengths_;
  std::size_t count_ = 0;
};

// Datagrams queued for one sendmmsg; bytes are copied in so callers may reuse their buffers.
class SendBatch {
 public:
  void add(const Endpoint& to, std::span<const std::uint8_t> bytes);
  std::size_t size() const { return count_; }
  void clear() { count_ = 0; }

 private:
  friend class UdpSocket;
  std::vector<std::vector<std::uint8_t>> buffers_;
  std::vector<sockaddr_in> addresses_;
  std::size_t count_ = 0;
};

struct SocketCounters {
  std::uint64_t received = 0, sent = 0, send_failures = 0, receive_calls = 0, send_calls = 0;
  std::uint64_t congestion_experienced = 0;  // datagrams received with CE
};

// Bytes the kernel holds for the socket (SO_MEMINFO, buffer sizes as the kernel charges them):
// datagrams received and not yet read, and datagrams sent and not yet on the wire (in the
// device's queue discipline, behind a shaper or a busy link).
struct SocketBacklog {
  std::uint32_t receive = 0, send = 0;
};

class UdpSocket {
 public:
  // Binds (port 0: any free port). Throws std::system_error with the address in the message.
  explicit UdpSocket(const Endpoint& local);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  int fd() const { return fd_; }
  Endpoint local() const;

  // Fills `batch` with what is waiting (0 if nothing); never blocks.
  std::size_t receive(ReceiveBatch& batch);
  // Sends everything in `batch` (waiting for buffer space if the kernel is full), then clears it.
  void send(SendBatch& batch);
  const SocketCounters& counters() const { return counters_; }
  SocketBacklog backlog() const;

 private:
  int fd_ = -1;
  std::vector<mmsghdr> headers_;
  std::vector<iovec> iovecs_;
  SocketCounters counters_;
};

}  // namespace atp::runtime
