#include "runtime/local_servers.h"

#include <cctype>

#include "runtime/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
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

// Writes what the socket takes now: a client that does not read its answer must not hold the
// loop (MSG_NOSIGNAL: one that hung up must not kill the daemon with SIGPIPE either).
void answer_without_waiting(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Waits until `fd` is ready for `events` or `deadline` passes (false).
bool wait_until(int fd, short events, Time deadline) {
  for (;;) {
    const Time left = deadline - monotonic_now();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>((left + kMillisecond - 1) / kMillisecond));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) throw std::invalid_argument("control socket path too long: " + path);
  std::strcpy(a.sun_path, path.c_str());
  return a;
}

// "tcp://a.b.c.d:port", or nullopt for a Unix socket path.
std::optional<Endpoint> tcp_address(const std::string& address) {
  if (!is_tcp_control(address)) return std::nullopt;
  return Endpoint::parse_or_throw(std::string_view(address).substr(kTcpScheme.size()), "control address");
}

// The uid of a Unix socket's peer, or nullopt if the kernel does not say.
std::optional<uid_t> peer_uid(int fd) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return std::nullopt;
  return peer.uid;
}

// Who may be on the other end of a control socket: this user, or root.
bool trusted(uid_t uid) { return uid == ::geteuid() || uid == 0; }

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

RequestServer::RequestServer(EventLoop& loop, int listen_fd, Respond respond)
    : loop_(loop), fd_(listen_fd), respond_(std::move(respond)) {
  // Accepting runs until the backlog is empty, so it must never block.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  expiry_timer_ = loop_.add_timer([this] { close_expired(); });
  loop_.watch(fd_, [this] { accept_clients(); });
}

RequestServer::~RequestServer() {
  loop_.disarm(expiry_timer_);
  while (!clients_.empty()) close_client(clients_.begin()->first);
  loop_.unwatch(fd_);
  ::close(fd_);
}

void RequestServer::accept_clients() {
  for (;;) {
    sockaddr_storage from{};
    socklen_t from_length = sizeof from;
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &from_length,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    // A Unix peer must run as this user or root, whatever the socket file's mode lets connect.
    if (from.ss_family == AF_UNIX) {
      const std::optional<uid_t> uid = peer_uid(fd);
      if (!uid || !trusted(*uid)) {
        const std::string refusal = "{\"ok\":false,\"error\":\"this daemon answers its own user "
                                    "and root only, not uid " + std::to_string(uid.value_or(-1)) + "\"}\n";
        (void)!::send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
    }
    if (clients_.size() >= kMaxClients) close_client(oldest()->first);  // likeliest to be stuck
    clients_[fd].deadline = monotonic_now() + kRequestBudget;
    loop_.watch(fd, [this, fd] { on_client(fd); });
  }
  arm_expiry();
}

void RequestServer::on_client(int fd) {
  const auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  std::string& request = it->second.request;
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n > 0) request.append(buffer, static_cast<std::size_t>(n));
  const bool whole = n == 0 || request.find('\n') != std::string::npos;
  if (n < 0 || (!whole && request.size() < kMaxRequestBytes)) {
    if (n < 0) close_client(fd);
    return;
  }
  if (request.size() > kMaxRequestBytes) request.resize(kMaxRequestBytes);
  answer_without_waiting(fd, respond_(request));
  close_client(fd);
}

void RequestServer::close_client(int fd) {
  loop_.unwatch(fd);
  ::close(fd);
  clients_.erase(fd);
}

void RequestServer::close_expired() {
  const Time now = monotonic_now();
  for (auto it = clients_.begin(); it != clients_.end();) {
    const int fd = it->first;
    const bool expired = it->second.deadline <= now;
    ++it;  // close_client erases fd's entry
    if (expired) close_client(fd);
  }
  arm_expiry();
}

// The client whose budget ends first (every client gets the same budget: the oldest).
std::map<int, RequestServer::Client>::iterator RequestServer::oldest() {
  return std::min_element(clients_.begin(), clients_.end(), [](const auto& a, const auto& b) {
    return a.second.deadline < b.second.deadline;
  });
}

void RequestServer::arm_expiry() {
  if (clients_.empty()) return loop_.disarm(expiry_timer_);
  loop_.arm(expiry_timer_, oldest()->second.deadline);
}

ControlSocket::ControlSocket(EventLoop& loop, std::string path, Handler handler) : path_(std::move(path)) {
  sockaddr_storage a;
  socklen_t length = 0;
  const int fd = stream_socket(path_, a, length);
  const bool tcp = a.ss_family == AF_INET;
  const int one = 1;
  if (tcp) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  else ::unlink(path_.c_str());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), length) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "control socket " + path_);
  }
  server_ = std::make_unique<RequestServer>(
      loop, fd, [handler = std::move(handler)](const std::string& r) { return answer(handler, r); });
}

ControlSocket::~ControlSocket() {
  server_.reset();
  if (!tcp_address(path_)) ::unlink(path_.c_str());
}

std::string ControlSocket::answer(const Handler& handler, const std::string& request) {
  nlohmann::json reply;
  try {
    reply = handler(nlohmann::json::parse(request));
  } catch (const std::exception& e) {
    reply = {{"ok", false}, {"error", e.what()}};
  }
  // A request's bytes come back in error messages (a parse error quotes them, a handler names
  // what it did not know): bytes that are not UTF-8 become U+FFFD rather than an exception.
  return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

nlohmann::json control_request(const std::string& path, const nlohmann::json& request, Time budget) {
  const Time deadline = monotonic_now() + budget;
  sockaddr_storage a;
  socklen_t length = 0;
  const int fd = stream_socket(path, a, length);
  auto give_up = [&](const std::string& what, int e) {
    ::close(fd);
    throw std::system_error(e, std::generic_category(), what + " " + path);
  };
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) give_up("connect", errno);
    if (!wait_until(fd, POLLOUT, deadline)) give_up("connect (no answer in time)", ETIMEDOUT);
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) give_up("connect", error);
  }
  // A Unix socket path in a shared folder can be bound by anyone while its daemon is down: talk
  // only to a peer running as this user or root, or the request (a job's TOML and token) would
  // go to whoever squatted it.
  if (!is_tcp_control(path)) {
    const std::optional<uid_t> uid = peer_uid(fd);
    if (!uid) give_up("peer credentials of", errno);
    if (!trusted(*uid)) {
      ::close(fd);
      throw std::system_error(EPERM, std::generic_category(),
                              "the control socket " + path + " is served by uid " +
                                  std::to_string(*uid) + ", neither this user nor root: "
                                  "nothing was sent to it (another user may have bound its path)");
    }
  }
  const std::string line = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (std::size_t done = 0; done < line.size();) {
    if (!wait_until(fd, POLLOUT, deadline)) give_up("send (no room in time)", ETIMEDOUT);
    const ssize_t n = ::send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) give_up("send", errno);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  std::string reply;
  char buffer[4096];
  for (;;) {
    if (!wait_until(fd, POLLIN, deadline)) give_up("no whole answer in time from", ETIMEDOUT);
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN && errno != EINTR) give_up("read", errno);
    if (n > 0) reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return nlohmann::json::parse(reply);
}

MetricsServer::MetricsServer(EventLoop& loop, const std::string& address, std::uint16_t port,
                             Render render) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(),
                            "metrics on " + address + ":" + std::to_string(port));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  server_ = std::make_unique<RequestServer>(loop, fd, [render = std::move(render)](const std::string&) {
    const std::string body = render();
    return "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  });
}

MetricsServer::~MetricsServer() = default;

std::string prometheus_text(const std::string& kind, const std::string& name,
                            const nlohmann::json& stats) {
  std::string out;
  std::string metric_kind = kind;
  for (char& c : metric_kind)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  const std::string label = metric_kind + "=\"" + name + "\"";
  for (const auto& [field, value] : stats.items())
    if (value.is_number())
      out += "atp_" + metric_kind + "_" + field + "{" + label + "} " + value.dump() + "\n";
  if (stats.contains("jobs"))
    for (const auto& [job, counters] : stats["jobs"].items())
      for (const auto& [field, value] : counters.items())
        if (value.is_number())
          out += "atp_" + metric_kind + "_job_" + field + "{" + label + ",job=\"" + job + "\"} " +
                 value.dump() + "\n";
  return out;
}

}  // namespace atp::runtime
