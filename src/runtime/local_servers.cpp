#include "runtime/local_servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace atp::runtime {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Reads until a newline, the peer closes, or 100 ms pass: requests are tiny.
std::string read_request(int fd) {
  std::string data;
  char buffer[4096];
  while (data.find('\n') == std::string::npos && data.size() < (1 << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) break;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) throw std::invalid_argument("control socket path too long: " + path);
  std::strcpy(a.sun_path, path.c_str());
  return a;
}

}  // namespace

ControlSocket::ControlSocket(EventLoop& loop, std::string path, Handler handler)
    : path_(std::move(path)), handler_(std::move(handler)) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket");
  const sockaddr_un a = unix_address(path_);
  ::unlink(path_.c_str());
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fail("bind " + path_);
  if (::listen(fd_, 16) != 0) fail("listen " + path_);
  loop.watch(fd_, [this] { on_connection(); });
}

ControlSocket::~ControlSocket() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

void ControlSocket::on_connection() {
  const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  nlohmann::json answer;
  try {
    answer = handler_(nlohmann::json::parse(read_request(client)));
  } catch (const std::exception& e) {
    answer = {{"ok", false}, {"error", e.what()}};
  }
  write_all(client, answer.dump() + "\n");
  ::close(client);
}

nlohmann::json control_request(const std::string& path, const nlohmann::json& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  const sockaddr_un a = unix_address(path);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "connect " + path);
  }
  write_all(fd, request.dump() + "\n");
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
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1)
    throw std::invalid_argument("metrics address '" + address + "' is not IPv4");
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    fail("bind metrics " + address + ":" + std::to_string(port));
  if (::listen(fd_, 16) != 0) fail("listen metrics");
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  loop.watch(fd_, [this] { on_connection(); });
}

MetricsServer::~MetricsServer() { ::close(fd_); }

void MetricsServer::on_connection() {
  const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  read_request(client);
  const std::string body = render_();
  write_all(client, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
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
