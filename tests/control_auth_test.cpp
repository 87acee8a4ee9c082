// A daemon's control over TCP (issue 49 items 2 and 4): the daemon and its caller prove to each
// other that they hold the control secret without sending it (runtime/control_auth.h); a
// listener that cannot prove it (a local user on a stopped daemon's port, a relay to another
// daemon) gets nothing of the request; and a peer without the secret is read no further than
// the handshake's few bytes, whatever it sends.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "runtime/control_auth.h"
#include "runtime/local_servers.h"

namespace atp::runtime {
namespace {

constexpr char kSecret[] = "5b1e0c2a9f7d4e3b8a6c1d0e2f4a6b8c";

// A TCP control socket on its own loop thread; its handler counts what reached it.
class TcpServed {
 public:
  TcpServed() {
    control_.emplace(
        loop_, "tcp://127.0.0.1:0",
        [this](const nlohmann::json& r) {
          ++handled_;
          return nlohmann::json{{"ok", true}, {"echo", r.value("cmd", "")}};
        },
        kSecret);
    loop_.on_wake([] {});
    thread_ = std::thread([this] { loop_.run(); });
  }
  ~TcpServed() {
    loop_.stop();
    loop_.wake();
    thread_.join();
  }
  std::uint16_t port() const { return control_->server().port(); }
  std::string address() const { return "tcp://127.0.0.1:" + std::to_string(port()); }
  const RequestServer& server() const { return control_->server(); }
  int handled() const { return handled_; }

 private:
  EventLoop loop_;
  std::optional<ControlSocket> control_;
  std::thread thread_;
  std::atomic<int> handled_{0};
};

int listen_tcp(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  ::listen(fd, 8);
  socklen_t size = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  port = ntohs(a.sin_port);
  return fd;
}

int connect_tcp(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything `fd` sends until it closes or `quiet_ms` pass without a byte.
std::string drain(int fd, int quiet_ms = 1500) {
  std::string got;
  char buffer[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, quiet_ms) <= 0) return got;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return got;
    got.append(buffer, static_cast<std::size_t>(n));
  }
}

void send_all(int fd, const std::string& data) {
  for (std::size_t done = 0; done < data.size();) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the daemon closed: the rest is not read
    done += static_cast<std::size_t>(n);
  }
}

TEST(TcpControl, AnswersOnlyACallerThatProvesTheSecret) {
  TcpServed daemon;
  const nlohmann::json answer = control_request(daemon.address(), {{"cmd", "list"}}, kSecond, kSecret);
  EXPECT_EQ(answer, (nlohmann::json{{"ok", true}, {"echo", "list"}}));
  EXPECT_EQ(daemon.handled(), 1);
  // Another secret: the daemon's proof does not hold for it, so nothing is sent.
  EXPECT_THROW(control_request(daemon.address(), {{"cmd", "list"}}, kSecond, "another secret"),
               std::system_error);
  // No secret: refused before connecting.
  EXPECT_THROW(control_request(daemon.address(), {{"cmd", "list"}}, kSecond), std::invalid_argument);
  EXPECT_EQ(daemon.handled(), 1);
  // A Unix socket's control takes no secret (its peer's uid is checked).
  EXPECT_THROW(ControlSocket(*std::make_unique<EventLoop>(), "tcp://127.0.0.1:0",
                             [](const nlohmann::json&) { return nlohmann::json{}; }),
               std::invalid_argument);
}

// Before: the secret travelled in every request, and a local user listening on a stopped
// daemon's port received it, then a job's TOML with its wire token. Now such a listener sees
// only the hello line (a nonce), and nothing follows its failed proof.
TEST(TcpControl, AListenerThatCannotProveTheSecretGetsNothing) {
  std::uint16_t port = 0;
  const int listener = listen_tcp(port);
  std::string heard;
  std::thread fake([&] {
    const int c = ::accept(listener, nullptr, nullptr);
    heard = drain(c, 300);
    const std::string guess = control_auth::fresh_nonce() + " " + std::string(64, 'a') + "\n";
    send_all(c, guess);
    heard += drain(c);
    ::close(c);
  });
  EXPECT_THROW(control_request("tcp://127.0.0.1:" + std::to_string(port),
                               {{"cmd", "admit"}, {"jobs", "token = 1234"}}, 3 * kSecond, kSecret),
               std::system_error);
  fake.join();
  ::close(listener);
  EXPECT_EQ(heard.size(), control_auth::kHelloLineBytes) << heard;
  EXPECT_TRUE(heard.starts_with(control_auth::kHello)) << heard;
  EXPECT_EQ(heard.find(kSecret), std::string::npos);
  EXPECT_EQ(heard.find("token"), std::string::npos);
}

// A listener that relays the handshake to a real daemon holding the same secret gets that
// daemon's proof, for that daemon's address: the caller, which dialled the relay, refuses it.
TEST(TcpControl, AProofRelayedFromAnotherDaemonIsRefused) {
  TcpServed daemon;
  std::uint16_t port = 0;
  const int listener = listen_tcp(port);
  std::string from_caller;
  std::thread relay([&] {
    const int c = ::accept(listener, nullptr, nullptr);
    const int d = connect_tcp(daemon.port());
    for (bool open = true; open;) {
      pollfd p[2] = {{c, POLLIN, 0}, {d, POLLIN, 0}};
      if (::poll(p, 2, 1500) <= 0) break;
      char buffer[4096];
      for (int i = 0; i < 2; ++i)
        if (p[i].revents != 0) {
          const ssize_t n = ::read(p[i].fd, buffer, sizeof buffer);
          if (n <= 0) {
            open = false;
            break;
          }
          if (i == 0) from_caller.append(buffer, static_cast<std::size_t>(n));
          send_all(i == 0 ? d : c, std::string(buffer, static_cast<std::size_t>(n)));
        }
    }
    ::close(c);
    ::close(d);
  });
  EXPECT_THROW(control_request("tcp://127.0.0.1:" + std::to_string(port), {{"cmd", "list"}},
                               3 * kSecond, kSecret),
               std::system_error);
  relay.join();
  ::close(listener);
  EXPECT_EQ(from_caller.size(), control_auth::kHelloLineBytes) << from_caller;
  EXPECT_EQ(daemon.handled(), 0);
}

// Before: three peers sending 256 KiB requests without the secret cut the switch's round trips
// to a twentieth, each request parsed on the packet loop before the secret was checked. Now a
// peer without the secret is read no further than the hello line and a proof, and nothing it
// sent is parsed.
TEST(TcpControl, APeerWithoutTheSecretIsReadNoFurtherThanTheHandshake) {
  TcpServed daemon;
  const std::string big = "{\"cmd\":\"list\",\"pad\":\"" + std::string(256 << 10, 'x') + "\"}\n";
  for (int k = 0; k < 3; ++k) {  // the old protocol: a request line straight away
    const int fd = connect_tcp(daemon.port());
    send_all(fd, big);
    EXPECT_NE(drain(fd).find("needs its secret"), std::string::npos);
    ::close(fd);
  }
  for (int k = 0; k < 3; ++k) {  // a hello, then a guessed proof and a big request
    const int fd = connect_tcp(daemon.port());
    send_all(fd, std::string(control_auth::kHello) + control_auth::fresh_nonce() + "\n");
    std::string line;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    EXPECT_EQ(line.size(), control_auth::kNonceChars + 1 + control_auth::kMacChars) << line;
    send_all(fd, std::string(64, 'b') + " " + big);
    EXPECT_NE(drain(fd).find("needs its secret"), std::string::npos);
    ::close(fd);
  }
  EXPECT_EQ(daemon.handled(), 0);
  EXPECT_EQ(daemon.server().refused_proofs(), 6u);
  EXPECT_LE(daemon.server().bytes_before_proof(),
            6 * (control_auth::kHelloLineBytes + control_auth::kProofBytes));
  // A caller with the secret is served all the same, a request of the largest size included.
  EXPECT_EQ(control_request(daemon.address(), {{"cmd", "ping"}, {"pad", std::string(200 << 10, 'y')}},
                            kSecond, kSecret)["echo"],
            "ping");
}

// However many connections peers open, the daemon takes at most kMaxClients at once and
// kHandshakesPerSecond after that; the rest wait in the kernel's backlog (the bound only grows
// with the time taken, so a slow machine cannot fail this).
TEST(TcpControl, ConnectionsAreTakenAtABoundedRate) {
  TcpServed daemon;
  const auto started = std::chrono::steady_clock::now();
  std::vector<int> opened;
  for (int k = 0; k < 60; ++k) opened.push_back(connect_tcp(daemon.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::uint64_t taken = daemon.server().connections_taken();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LE(taken, RequestServer::kMaxClients + RequestServer::kHandshakesPerSecond * seconds + 1)
      << "in " << seconds << " s";
  EXPECT_GE(taken, RequestServer::kMaxClients);
  for (int fd : opened) ::close(fd);
  EXPECT_EQ(control_request(daemon.address(), {{"cmd", "list"}}, 3 * kSecond, kSecret)["ok"], true);
}

TEST(ControlAuth, EachRoleAddressAndNonceGivesItsOwnMac) {
  const std::string caller = control_auth::fresh_nonce(), daemon = control_auth::fresh_nonce();
  EXPECT_NE(caller, daemon);
  EXPECT_EQ(caller.size(), control_auth::kNonceChars);
  const std::string base = control_auth::mac(kSecret, control_auth::Role::server, "10.0.0.1:9000", caller, daemon);
  EXPECT_EQ(base.size(), control_auth::kMacChars);
  EXPECT_TRUE(control_auth::verify(base, kSecret, control_auth::Role::server, "10.0.0.1:9000", caller, daemon));
  EXPECT_NE(base, control_auth::mac(kSecret, control_auth::Role::client, "10.0.0.1:9000", caller, daemon));
  EXPECT_NE(base, control_auth::mac(kSecret, control_auth::Role::server, "10.0.0.1:9001", caller, daemon));
  EXPECT_NE(base, control_auth::mac(kSecret, control_auth::Role::server, "10.0.0.1:9000", daemon, caller));
  EXPECT_NE(base, control_auth::mac("other", control_auth::Role::server, "10.0.0.1:9000", caller, daemon));
  EXPECT_FALSE(control_auth::verify(base.substr(1), kSecret, control_auth::Role::server, "10.0.0.1:9000", caller, daemon));
  EXPECT_EQ(control_auth::nonce_of_hello("ATP-AUTH1 " + caller), caller);
  EXPECT_EQ(control_auth::nonce_of_hello("ATP-AUTH1 " + caller.substr(1) + "g"), "");
  EXPECT_EQ(control_auth::nonce_of_hello("{\"cmd\":\"list\"}"), "");
}

}  // namespace
}  // namespace atp::runtime
