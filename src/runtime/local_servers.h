#pragma once
// Two small servers that run inside a daemon's event loop, for operators rather than data:
//   ControlSocket  a Unix-domain socket (a path) or a TCP one ("tcp://a.b.c.d:port") taking
//                  one JSON request per connection (a line) and answering one JSON line (used
//                  by `atp ctl` and the controller);
//   MetricsServer  plain HTTP on a TCP port answering any GET with Prometheus text.
// Both are strictly request/response and close the connection after answering. They share the
// daemon's loop with packets, so neither ever waits for a client: a request is collected as its
// bytes arrive, and a client that is slow, silent or one too many is closed (RequestServer).
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "runtime/event_loop.h"

namespace atp::runtime {

// One request per connection, collected without blocking: each client has kRequestBudget to
// send its request (up to its first newline, or until it shuts its side), at most
// kMaxRequestBytes of it, and at most kMaxClients are open at once (a new one closes the
// oldest). `respond` turns the request's bytes into the answer, written once, then the
// connection is closed. With a `secret` (TCP control), the client must first prove it holds it
// (control_auth.h): before that, no more than the handshake's few bytes are read, nothing is
// parsed and `respond` is never called.
class RequestServer {
 public:
  static constexpr Time kRequestBudget = 2 * kSecond;
  static constexpr std::size_t kMaxClients = 32;
  static constexpr std::size_t kMaxRequestBytes = 256 << 10;  // an admission of 1024 workers
  // With a secret, connections are taken at most this many a second (in bursts of kMaxClients):
  // beyond it the listening socket waits, so peers without the secret, however many
  // connections they open, cost the daemon's loop a bounded share (issue 49 item 4).
  static constexpr double kHandshakesPerSecond = 100;
  using Respond = std::function<std::string(const std::string& request)>;

  // Takes `listen_fd` (bound and listening; made non-blocking here) and closes it when destroyed.
  RequestServer(EventLoop& loop, int listen_fd, Respond respond, std::string secret = {});
  ~RequestServer();
  RequestServer(const RequestServer&) = delete;
  RequestServer& operator=(const RequestServer&) = delete;
  std::size_t open_clients() const { return clients_.size(); }
  // What clients sent before proving the secret (all they sent, without a secret), and how
  // many were refused for a wrong proof or a malformed handshake.
  std::uint64_t bytes_before_proof() const { return bytes_before_proof_; }
  std::uint64_t refused_proofs() const { return refused_proofs_; }
  std::uint64_t connections_taken() const { return connections_taken_; }
  // The port it listens on (TCP), e.g. after binding port 0.
  std::uint16_t port() const;

 private:
  enum class Phase { hello, proof, request };
  struct Client {
    Time deadline = 0;
    std::string request;
    Phase phase = Phase::request;
    std::string caller_nonce, daemon_nonce, address;  // the handshake's (control_auth.h)
  };
  void accept_clients();
  bool may_take_another();
  void on_client(int fd);
  void on_hello(int fd, Client& c);
  void on_proof(int fd, Client& c);
  void answer_request(int fd, Client& c);
  void refuse(int fd, const std::string& why);
  void close_client(int fd);
  void close_expired();
  void arm_expiry();
  std::map<int, Client>::iterator oldest();

  EventLoop& loop_;
  int fd_;
  Respond respond_;
  std::string secret_;
  std::map<int, Client> clients_;
  int expiry_timer_ = -1;
  int resume_timer_ = -1;  // accepting again after may_take_another() ran out
  double handshakes_ = kMaxClients;
  Time handshakes_at_ = 0;
  std::atomic<std::uint64_t> bytes_before_proof_{0};  // read from other threads (stats, tests)
  std::atomic<std::uint64_t> refused_proofs_{0};
  std::atomic<std::uint64_t> connections_taken_{0};
};

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  // Replaces a stale socket file at `path`. A TCP address needs `secret`: callers prove they
  // hold it (control_auth.h); a Unix socket checks its peer's uid instead and takes none.
  // Throws std::system_error on failure, std::invalid_argument on a TCP address without secret.
  ControlSocket(EventLoop& loop, std::string path, Handler handler, std::string secret = {});
  ~ControlSocket();
  // What a request's bytes get: the handler's answer, or {"ok":false,"error":...} for bytes
  // that are not a JSON request or a handler that throws; always one valid JSON line.
  static std::string answer(const Handler& handler, const std::string& request);
  const RequestServer& server() const { return *server_; }

 private:
  std::string path_;
  std::unique_ptr<RequestServer> server_;
};

// Whether a control address is "tcp://a.b.c.d:port" (else a Unix socket path). Over TCP both
// ends prove they hold the daemon's secret (control_auth.h); on a Unix socket the peer's uid
// is checked instead.
inline constexpr std::string_view kTcpScheme = "tcp://";
inline bool is_tcp_control(std::string_view address) { return address.starts_with(kTcpScheme); }

// Sends one request to a control socket (a path or "tcp://a.b.c.d:port") and returns the
// answer. The whole exchange (connect, send, the answer) gets `budget`: a daemon that is
// stopped, or answers a byte at a time, costs its caller no more (throws on failure or time-out).
// Over TCP `secret` is required: nothing of the request leaves before the daemon proved it holds
// it, and the answer counts only with its MAC (control_auth.h).
inline constexpr Time kControlRequestBudget = 5 * kSecond;
nlohmann::json control_request(const std::string& path, const nlohmann::json& request,
                               Time budget = kControlRequestBudget, const std::string& secret = {});

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  MetricsServer(EventLoop& loop, const std::string& address, std::uint16_t port, Render render);
  ~MetricsServer();
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_ = 0;
  std::unique_ptr<RequestServer> server_;
};

// Prometheus text for a daemon's statistics: numbers at the top level become
// atp_<kind>_<field>{<kind>="<name>"}, numbers under "jobs" atp_<kind>_job_<field>{..., job="id"}.
// A kind of several words ("p4 agent") is joined by underscores: a metric name has no space.
std::string prometheus_text(const std::string& kind, const std::string& name,
                            const nlohmann::json& stats);

}  // namespace atp::runtime
