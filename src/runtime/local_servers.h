#pragma once
// Two small servers that run inside a daemon's event loop, for operators rather than data:
//   ControlSocket  a Unix-domain socket (a path) or a TCP one ("tcp://a.b.c.d:port") taking
//                  one JSON request per connection (a line) and answering one JSON line (used
//                  by `atp ctl` and the controller);
//   MetricsServer  plain HTTP on a TCP port answering any GET with Prometheus text.
// Both are strictly request/response and close the connection after answering. They share the
// daemon's loop with packets, so neither ever waits for a client: a request is collected as its
// bytes arrive, and a client that is slow, silent or one too many is closed (RequestServer).
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
// connection is closed.
class RequestServer {
 public:
  static constexpr Time kRequestBudget = 2 * kSecond;
  static constexpr std::size_t kMaxClients = 32;
  static constexpr std::size_t kMaxRequestBytes = 256 << 10;  // an admission of 1024 workers
  using Respond = std::function<std::string(const std::string& request)>;

  // Takes `listen_fd` (bound and listening; made non-blocking here) and closes it when destroyed.
  RequestServer(EventLoop& loop, int listen_fd, Respond respond);
  ~RequestServer();
  RequestServer(const RequestServer&) = delete;
  RequestServer& operator=(const RequestServer&) = delete;
  std::size_t open_clients() const { return clients_.size(); }

 private:
  struct Client {
    Time deadline = 0;
    std::string request;
  };
  void accept_clients();
  void on_client(int fd);
  void close_client(int fd);
  void close_expired();
  void arm_expiry();
  std::map<int, Client>::iterator oldest();

  EventLoop& loop_;
  int fd_;
  Respond respond_;
  std::map<int, Client> clients_;
  int expiry_timer_ = -1;
};

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  // Replaces a stale socket file at `path`. Throws std::system_error on failure.
  ControlSocket(EventLoop& loop, std::string path, Handler handler);
  ~ControlSocket();
  // What a request's bytes get: the handler's answer, or {"ok":false,"error":...} for bytes
  // that are not a JSON request or a handler that throws; always one valid JSON line.
  static std::string answer(const Handler& handler, const std::string& request);

 private:
  std::string path_;
  std::unique_ptr<RequestServer> server_;
};

// Whether a control address is "tcp://a.b.c.d:port" (else a Unix socket path). Over TCP a
// request carries the daemon's secret; on a Unix socket the peer's uid is checked instead.
inline constexpr std::string_view kTcpScheme = "tcp://";
inline bool is_tcp_control(std::string_view address) { return address.starts_with(kTcpScheme); }

// Sends one request to a control socket (a path or "tcp://a.b.c.d:port") and returns the
// answer. The whole exchange (connect, send, the answer) gets `budget`: a daemon that is
// stopped, or answers a byte at a time, costs its caller no more (throws on failure or time-out).
inline constexpr Time kControlRequestBudget = 5 * kSecond;
nlohmann::json control_request(const std::string& path, const nlohmann::json& request,
                               Time budget = kControlRequestBudget);

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
