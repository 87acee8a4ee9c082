#include "runtime/local_servers.h"

#include "runtime/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>

namespace atp::runtime {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// These servers share the daemon's loop with packets, so a client gets a bounded slice of it:
// the request must arrive within kBudgetMs in all (requests are one short line), and the answer
// is written without waiting for a slow reader.
constexpr int kBudgetMs = 20;
constexpr std::size_t kMaxRequest = 256 << 10;  // an admission of 1024 workers fits

std::string read_request(int fd) {
  std::string data;
  char buffer[4096];
  const Time deadline = monotonic_now() + kBudgetMs * kMillisecond;
  while (data.find('\n') == std::string::npos && data.size() < kMaxRequest) {
    const Time left = deadline - monotonic_now();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left / kMillisecond) + 1) <= 0) break;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

// MSG_NOSIGNAL: a client that hung up must not kill the daemon with SIGPIPE.
void write_all(int fd, const std::string& data, int flags) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | flags);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The socket is non-blocking: an answer that does not fit the kernel buffer is cut short.
void answer(int client, const std::string& data) { write_all(client, data, MSG_DONTWAIT); }

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) throw std::invalid_argument("control socket path too long: " + path);
  std::strcpy(a.sun_path, path.c_str());
  return a;
}

// "tcp://a.b.c.d:port", or nullopt for a Unix socket path.
std::optional<Endpoint> tcp_address(const std::string& address) {
  constexpr std::string_view scheme = "tcp://";
  if (address.compare(0, scheme.size(), scheme) != 0) return std::nullopt;
  return Endpoint::parse_or_throw(std::string_view(address).substr(scheme.size()), "control address");
}

// A stream socket for `address`: its family, and the address to bind or connect to.
int stream_socket(const std::string& address, sockaddr_storage& to, socklen_t& length) {
  to = {};
  int family = AF_UNIX;
  if (const auto tcp = tcp_address(address)) {
    const sockaddr_in a = tcp->sockaddr();
    std::memcpy(&to, &a, sizeof a);
    length = sizeof a;
    family = AF_INET;
  } else {
    const sockaddr_un a = unix_address(address);
    std::memcpy(&to, &a, sizeof a);
    length = sizeof a;
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  return fd;
}

}  // namespace

ControlSocket::ControlSocket(EventLoop& loop, std::string path, Handler handler)
    : path_(std::move(path)), handler_(std::move(handler)) {
  sockaddr_storage a;
  socklen_t length = 0;
  fd_ = stream_socket(path_, a, length);
  const bool tcp = a.ss_family == AF_INET;
  const int one = 1;
  if (tcp) ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  else ::unlink(path_.c_str());
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), length) != 0 || ::listen(fd_, 16) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::system_error(e, std::generic_category(), "control socket " + path_);
  }
  loop.watch(fd_, [this] { on_connection(); });
}

ControlSocket::~ControlSocket() {
  ::close(fd_);
  if (!tcp_address(path_)) ::unlink(path_.c_str());
}

void ControlSocket::on_connection() {
  const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (client < 0) return;
  nlohmann::json reply;
  try {
    reply = handler_(nlohmann::json::parse(read_request(client)));
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"error", e.what()}};
  }
  answer(client, reply.dump() + "\n");
  ::close(client);
}

nlohmann::json control_request(const std::string& path, const nlohmann::json& request) {
  sockaddr_storage a;
  socklen_t length = 0;
  const int fd = stream_socket(path, a, length);
  // A daemon that stopped (SIGSTOP, a hung host) must not hang its caller (the controller):
  // Linux bounds connect() by the send timeout too (a full backlog, a SYN nobody answers).
  const timeval patience{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof patience);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "connect " + path);
  }
  write_all(fd, request.dump() + "\n", 0);
  std::string reply;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) reply.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return nlohmann::json::parse(reply);
}

MetricsServer::MetricsServer(EventLoop& loop, const std::string& address, std::uint16_t port,
                             Render render)
    : render_(std::move(render)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket");
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1 ||
      ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0) {
    const int e = errno;
    ::close(fd_);
    throw std::system_error(e, std::generic_category(),
                            "metrics on " + address + ":" + std::to_string(port));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  loop.watch(fd_, [this] { on_connection(); });
}

MetricsServer::~MetricsServer() { ::close(fd_); }

void MetricsServer::on_connection() {
  const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (client < 0) return;
  read_request(client);
  const std::string body = render_();
  answer(client, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body);
  ::close(client);
}

std::string prometheus_text(const std::string& kind, const std::string& name,
                            const nlohmann::json& stats) {
  std::string out;
  const std::string label = kind + "=\"" + name + "\"";
  for (const auto& [field, value] : stats.items())
    if (value.is_number())
      out += "atp_" + kind + "_" + field + "{" + label + "} " + value.dump() + "\n";
  if (stats.contains("jobs"))
    for (const auto& [job, counters] : stats["jobs"].items())
      for (const auto& [field, value] : counters.items())
        if (value.is_number())
          out += "atp_" + kind + "_job_" + field + "{" + label + ",job=\"" + job + "\"} " +
                 value.dump() + "\n";
  return out;
}

}  // namespace atp::runtime
