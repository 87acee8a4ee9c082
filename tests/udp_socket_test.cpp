// The runtime's UDP socket on loopback: ECN-capable sending, CE reporting, and the backlog the
// software switch marks from.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "runtime/udp_socket.h"

namespace atp::runtime {
namespace {

const Endpoint kAny = *Endpoint::parse("127.0.0.1:0");

// A plain socket, to see what UdpSocket sends and to send what UdpSocket must notice.
class PlainSocket {
 public:
  PlainSocket() : fd_(::socket(AF_INET, SOCK_DGRAM, 0)) {
    const sockaddr_in a = kAny.sockaddr();
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  }
  ~PlainSocket() { ::close(fd_); }
  Endpoint local() const {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return Endpoint::from(a);
  }
  void set_tos(int tos) { ::setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof tos); }
  void send_to(const Endpoint& to, std::uint8_t byte) {
    const sockaddr_in a = to.sockaddr();
    ASSERT_EQ(::sendto(fd_, &byte, 1, 0, reinterpret_cast<const sockaddr*>(&a), sizeof a), 1);
  }
  // The TOS byte of the next datagram (waits up to a second), or -1.
  int receive_tos() {
    const int on = 1;
    ::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &on, sizeof on);
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 1000) != 1) return -1;
    std::array<std::uint8_t, 2048> data{};
    std::array<char, CMSG_SPACE(sizeof(int))> control{};
    iovec v{data.data(), data.size()};
    msghdr m{};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    if (::recvmsg(fd_, &m, 0) < 0) return -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) return *CMSG_DATA(c);
    return -1;
  }

 private:
  int fd_;
};

std::size_t receive_waiting(UdpSocket& s, ReceiveBatch& batch) {
  pollfd p{s.fd(), POLLIN, 0};
  ::poll(&p, 1, 1000);
  return s.receive(batch);
}

TEST(UdpSocket, SendsEcnCapableTransport) {
  UdpSocket sender(kAny);
  PlainSocket receiver;
  SendBatch batch;
  const std::uint8_t byte = 7;
  batch.add(receiver.local(), {&byte, 1});
  sender.send(batch);
  EXPECT_EQ(receiver.receive_tos() & 0x03, 0x02);  // ECT(0)
}

// add() copies at once; add_borrowed() sends the caller's bytes as they are at send().
TEST(UdpSocket, BorrowedDatagramsLeaveFromTheCallersBuffer) {
  UdpSocket sender(kAny), receiver(kAny);
  std::vector<std::uint8_t> copied = {1, 1}, borrowed = {2, 2};
  SendBatch batch;
  batch.add(receiver.local(), copied);
  batch.add_borrowed(receiver.local(), borrowed);
  copied[1] = 9;
  borrowed[1] = 9;
  sender.send(batch);
  EXPECT_EQ(batch.size(), 0u);
  ReceiveBatch got(8, 64);
  std::vector<std::vector<std::uint8_t>> datagrams;
  for (int reads = 0; reads < 2 && datagrams.size() < 2; ++reads) {  // the second may lag
    const std::size_t n = receive_waiting(receiver, got);
    for (std::size_t i = 0; i < n; ++i)
      datagrams.emplace_back(got.packet(i).begin(), got.packet(i).end());
  }
  ASSERT_EQ(datagrams.size(), 2u);
  EXPECT_EQ(datagrams[0], (std::vector<std::uint8_t>{1, 1}));
  EXPECT_EQ(datagrams[1], (std::vector<std::uint8_t>{2, 9}));
}

TEST(UdpSocket, ReportsWhichDatagramsArrivedCongestionExperienced) {
  UdpSocket receiver(kAny);
  PlainSocket marked, unmarked;
  marked.set_tos(0x03);  // CE, as a marking queue on the way would leave it
  unmarked.set_tos(0x02);
  marked.send_to(receiver.local(), 1);
  unmarked.send_to(receiver.local(), 2);
  ReceiveBatch batch(8, 64);
  receive_waiting(receiver, batch);  // loopback delivers during sendto: both are there
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch.packet(0)[0], 1);
  EXPECT_TRUE(batch.congestion_experienced(0));
  EXPECT_FALSE(batch.congestion_experienced(1));
  EXPECT_EQ(receiver.counters().congestion_experienced, 1u);
}

TEST(UdpSocket, BacklogCountsWhatWaitsUnread) {
  UdpSocket receiver(kAny);
  PlainSocket sender;
  EXPECT_EQ(receiver.backlog().receive, 0u);
  for (std::uint8_t i = 0; i < 10; ++i) sender.send_to(receiver.local(), i);
  const std::uint32_t waiting = receiver.backlog().receive;
  EXPECT_GT(waiting, 10u);  // charged per buffer, so more than the payload bytes
  ReceiveBatch batch(16, 64);
  receive_waiting(receiver, batch);
  EXPECT_EQ(batch.size(), 10u);
  EXPECT_EQ(receiver.backlog().receive, 0u);
}

// Datagrams i = 0..count-1 of `size` bytes (the last `last` bytes), each filled with i.
void add_numbered(SendBatch& batch, const Endpoint& to, std::size_t count, std::size_t size,
                  std::size_t last) {
  for (std::size_t i = 0; i < count; ++i)
    batch.add(to, std::vector<std::uint8_t>(i + 1 == count ? last : size, static_cast<std::uint8_t>(i)));
}

std::vector<std::vector<std::uint8_t>> receive_all(UdpSocket& s, std::size_t expected) {
  std::vector<std::vector<std::uint8_t>> got;
  ReceiveBatch batch(64, 65536);
  for (int tries = 0; tries < 100 && got.size() < expected; ++tries) {
    receive_waiting(s, batch);
    for (std::size_t i = 0; i < batch.size(); ++i)
      got.emplace_back(batch.packet(i).begin(), batch.packet(i).end());
  }
  return got;
}

TEST(UdpSocket, ARunToOneDestinationLeavesAsOneTrainOfSeparateDatagrams) {
  UdpSocket sender(kAny, {.send_trains = true});
  PlainSocket plain;  // no UDP_GRO: the kernel hands it the datagrams one by one
  UdpSocket grouped(kAny, {.receive_trains = true});  // may get the train whole: must split it
  for (UdpSocket* receiver : {static_cast<UdpSocket*>(nullptr), &grouped}) {
    SendBatch batch;
    const Endpoint to = receiver ? receiver->local() : plain.local();
    add_numbered(batch, to, 10, 300, 120);
    const auto calls = sender.counters().send_calls;
    sender.send(batch);
    if (!sender.gso()) GTEST_SKIP() << "this kernel refuses UDP GSO: datagrams went one by one";
    EXPECT_EQ(sender.counters().send_calls - calls, 1u);
    if (receiver == nullptr) {
      for (std::size_t i = 0; i < 10; ++i) EXPECT_GE(plain.receive_tos(), 0) << i;
      continue;
    }
    const auto got = receive_all(*receiver, 10);
    ASSERT_EQ(got.size(), 10u);
    for (std::size_t i = 0; i < 10; ++i) {
      EXPECT_EQ(got[i].size(), i == 9 ? 120u : 300u);
      EXPECT_EQ(got[i][0], i);
    }
  }
  EXPECT_EQ(sender.counters().trains_sent, 2u);
  EXPECT_EQ(sender.counters().sent, 20u);
}

TEST(UdpSocket, DatagramsGroupByDestinationInOrderAndALongerOneStartsANewTrain) {
  UdpSocket sender(kAny, {.send_trains = true}), a(kAny), b(kAny);
  SendBatch batch;
  const std::vector<std::uint8_t> small1(100, 1), small2(100, 2), small3(100, 3), big4(200, 4),
      big5(200, 5);
  batch.add(a.local(), small1);
  batch.add(b.local(), small2);  // another destination: a's datagrams still group
  batch.add(a.local(), small3);
  batch.add(a.local(), big4);  // longer than the train's first: a new train
  batch.add(a.local(), big5);
  sender.send(batch);
  EXPECT_EQ(sender.counters().sent, 5u);
  EXPECT_EQ(sender.counters().trains_sent, sender.gso() ? 2u : 0u);
  const auto at_a = receive_all(a, 4);
  ASSERT_EQ(at_a.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)  // each destination's datagrams in the order added
    EXPECT_EQ(at_a[i][0], std::vector<int>({1, 3, 4, 5})[i]);
  EXPECT_EQ(receive_all(b, 1).size(), 1u);
}

TEST(UdpSocket, CongestionExperiencedIsCountedPerDatagram) {
  UdpSocket receiver(kAny);
  PlainSocket marked;
  marked.set_tos(0x03);
  for (std::uint8_t i = 0; i < 3; ++i) marked.send_to(receiver.local(), i);
  ReceiveBatch batch(8, 65536);
  receive_waiting(receiver, batch);
  ASSERT_EQ(batch.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(batch.congestion_experienced(i));
  EXPECT_EQ(receiver.counters().congestion_experienced, 3u);
}

}  // namespace
}  // namespace atp::runtime
