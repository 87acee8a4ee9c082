#pragma once
// Two small servers that run inside a daemon's event loop, for operators rather than data:
//   ControlSocket  a Unix-domain socket (a path) or a TCP one ("tcp://a.b.c.d:port") taking
//                  one JSON request per connection (a line) and answering one JSON line (used
//                  by `atp ctl` and the controller);
//   MetricsServer  plain HTTP on a TCP port answering any GET with Prometheus text.
// Both are strictly request/response and close the connection after answering.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/event_loop.h"

namespace atp::runtime {

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  // Replaces a stale socket file at `path`. Throws std::system_error on failure.
  ControlSocket(EventLoop& loop, std::string path, Handler handler);
  ~ControlSocket();

 private:
  void on_connection();
  int fd_ = -1;
  std::string path_;
  Handler handler_;
};

// Sends one request to a control socket (a path or "tcp://a.b.c.d:port") and returns the
// answer (throws on failure).
nlohmann::json control_request(const std::string& path, const nlohmann::json& request);

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  MetricsServer(EventLoop& loop, const std::string& address, std::uint16_t port, Render render);
  ~MetricsServer();
  std::uint16_t port() const { return port_; }

 private:
  void on_connection();
  int fd_ = -1;
  std::uint16_t port_ = 0;
  Render render_;
};

// Prometheus text for a daemon's statistics: numbers at the top level become
// atp_<kind>_<field>{<kind>="<name>"}, numbers under "jobs" atp_<kind>_job_<field>{..., job="id"}.
std::string prometheus_text(const std::string& kind, const std::string& name,
                            const nlohmann::json& stats);

}  // namespace atp::runtime
