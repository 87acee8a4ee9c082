#pragma once
// A non-blocking UDP socket that moves datagrams in batches (recvmmsg / sendmmsg): one system
// call per batch, not per packet. A batch's datagrams are grouped by destination and each
// group leaves as UDP GSO trains (UDP_SEGMENT): one trip through the socket layer for up to 64
// datagrams, each still its own datagram on the wire and to the engines; trains arriving are
// read whole (UDP_GRO). Everything it sends is ECN-capable (ECT(0)), and it reports which
// datagrams arrived marked Congestion Experienced (RFC 3168), so a queue on the path that
// marks instead of dropping reaches the protocol (docs/engines.md, "ECN on real packets").
#include <sys/socket.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/endpoint.h"

namespace atp::runtime {

// Receive buffers for up to `capacity` messages of up to `max_bytes` each (a GRO train fills
// up to 64 KiB), reused per call; indexed by datagram, a train's segments one by one.
class ReceiveBatch {
 public:
  ReceiveBatch(std::size_t capacity, std::size_t max_bytes);
  std::size_t size() const { return datagrams_.size(); }
  std::span<std::uint8_t> packet(std::size_t i) {
    const Datagram& d = datagrams_[i];
    return {buffers_[d.message].data() + d.offset, d.length};
  }
  Endpoint from(std::size_t i) const { return Endpoint::from(addresses_[datagrams_[i].message]); }
  // The IP header's ECN field said CE: a queue on the way was congested.
  bool congestion_experienced(std::size_t i) const {
    return congestion_experienced_[datagrams_[i].message] != 0;
  }

 private:
  friend class UdpSocket;
  struct Datagram {
    std::uint32_t message, offset, length;
  };
  // Reads message m's control data (TOS, GRO segment size) and lists its datagrams.
  void unpack(std::size_t m, std::size_t length);

  std::vector<std::vector<std::uint8_t>> buffers_;
  std::vector<sockaddr_in> addresses_;
  std::vector<std::vector<std::uint8_t>> controls_;  // ancillary data per message
  std::vector<std::uint8_t> congestion_experienced_;
  std::vector<iovec> iovecs_;
  std::vector<mmsghdr> headers_;
  std::vector<Datagram> datagrams_;
};

// Datagrams queued for one sendmmsg: copied in by add(), or borrowed by add_borrowed().
class SendBatch {
 public:
  // Copies `bytes`: they may change or go as soon as this returns.
  void add(const Endpoint& to, std::span<const std::uint8_t> bytes);
  // Sends `bytes` where they are, without a copy: they must stay as they are until send().
  // For datagrams in a receive batch or an engine's outbox, both of which outlive the send.
  void add_borrowed(const Endpoint& to, std::span<const std::uint8_t> bytes);
  std::size_t size() const { return datagrams_.size(); }
  void clear() {
    datagrams_.clear();
    addresses_.clear();
    copies_used_ = 0;
  }

 private:
  friend class UdpSocket;
  std::vector<std::span<const std::uint8_t>> datagrams_;
  std::vector<sockaddr_in> addresses_;
  std::vector<std::vector<std::uint8_t>> copies_;  // add()'s storage, reused batch to batch
  std::size_t copies_used_ = 0;
};

struct SocketCounters {
  std::uint64_t received = 0, sent = 0, send_failures = 0, receive_calls = 0, send_calls = 0;
  std::uint64_t congestion_experienced = 0;  // datagrams received with CE
  std::uint64_t trains_sent = 0;      // messages of more than one datagram (UDP GSO)
  std::uint64_t trains_received = 0;  // messages the kernel coalesced (UDP GRO)
};

// Bytes the kernel holds for the socket (SO_MEMINFO, buffer sizes as the kernel charges them):
// datagrams received and not yet read, and datagrams sent and not yet on the wire (in the
// device's queue discipline, behind a shaper or a busy link).
struct SocketBacklog {
  std::uint32_t receive = 0, send = 0;
};

struct SocketOptions {
  // UDP GSO on send. ATP_NO_GSO=1 turns it off (to measure what it buys).
  bool send_trains = true;
  // UDP GRO on receive: the kernel queues a train of datagrams as one buffer, which costs it
  // far less per datagram; receive() still hands them out one by one, with their CE marks.
  // At 500 Mbit/s it cut ATP's CPU seconds by a third (docs/performance.md). ATP_UDP_GRO=0
  // turns it off.
  bool receive_trains = true;
  static SocketOptions from_environment();
};

class UdpSocket {
 public:
  // Binds (port 0: any free port). Throws std::system_error with the address in the message.
  explicit UdpSocket(const Endpoint& local,
                     SocketOptions options = SocketOptions::from_environment());
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;
  // Bound before its owner exists (a worker publishes its port before its job is admitted).
  UdpSocket(UdpSocket&& other) noexcept;

  int fd() const { return fd_; }
  Endpoint local() const;

  // Fills `batch` with what is waiting (0 if nothing); never blocks.
  std::size_t receive(ReceiveBatch& batch);
  // Sends everything in `batch` (waiting for buffer space if the kernel is full), then clears it.
  void send(SendBatch& batch);
  // Sends an engine's outbox to the endpoints `book` names, its datagrams borrowed (through
  // `batch`, emptied again) rather than copied, then clears the outbox: only after the send,
  // as the borrowed bytes are the outbox's.
  void send(Outbox& outbox, const AddressBook& book, SendBatch& batch);
  const SocketCounters& counters() const { return counters_; }
  SocketBacklog backlog() const;
  // Whether sends still use UDP GSO: off if asked, or once the kernel refused a train (then
  // datagrams go one per message).
  bool gso() const { return gso_; }

 private:
  void order_by_destination(const SendBatch& batch);
  std::size_t plan_messages(SendBatch& batch, std::size_t from);
  std::size_t send_messages(std::size_t count);

  int fd_ = -1;
  bool gso_ = true;
  std::vector<mmsghdr> headers_;
  std::vector<iovec> iovecs_;
  std::vector<std::vector<std::uint8_t>> controls_;  // the UDP_SEGMENT size per message
  std::vector<std::size_t> segments_;                // datagrams per planned message
  std::vector<std::size_t> order_;                   // position -> datagram
  std::vector<std::size_t> group_of_;                // datagram -> destination index
  std::vector<std::pair<std::size_t, std::size_t>> destinations_;  // first datagram, count
  SocketCounters counters_;
};

}  // namespace atp::runtime
