#include "runtime/local_servers.h"

#include <cctype>

#include "runtime/control_auth.h"
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

RequestServer::RequestServer(EventLoop& loop, int listen_fd, Respond respond, std::string secret)
    : loop_(loop), fd_(listen_fd), respond_(std::move(respond)), secret_(std::move(secret)) {
  // Accepting runs until the backlog is empty, so it must never block.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  expiry_timer_ = loop_.add_timer([this] { close_expired(); });
  resume_timer_ = loop_.add_timer([this] { loop_.watch(fd_, [this] { accept_clients(); }); });
  handshakes_at_ = monotonic_now();
  loop_.watch(fd_, [this] { accept_clients(); });
}

RequestServer::~RequestServer() {
  loop_.disarm(expiry_timer_);
  loop_.disarm(resume_timer_);
  while (!clients_.empty()) close_client(clients_.begin()->first);
  loop_.unwatch(fd_);
  ::close(fd_);
}

std::uint16_t RequestServer::port() const {
  sockaddr_in a{};
  socklen_t size = sizeof a;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size) != 0 || a.sin_family != AF_INET) return 0;
  return ntohs(a.sin_port);
}

// Whether kHandshakesPerSecond leaves room for one more connection now; if not, stops watching
// the listening socket until it does (connections wait in the kernel's backlog meanwhile).
bool RequestServer::may_take_another() {
  if (secret_.empty()) return true;
  const Time now = monotonic_now();
  handshakes_ = std::min<double>(kMaxClients, handshakes_ + double(now - handshakes_at_) / kSecond *
                                                                 kHandshakesPerSecond);
  handshakes_at_ = now;
  if (handshakes_ >= 1) return true;  // spent by accept_clients once a connection came
  loop_.unwatch(fd_);
  loop_.arm(resume_timer_, now + static_cast<Time>((1 - handshakes_) / kHandshakesPerSecond * kSecond));
  return false;
}

void RequestServer::accept_clients() {
  for (;;) {
    if (!may_take_another()) break;
    sockaddr_storage from{};
    socklen_t from_length = sizeof from;
    const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &from_length,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    ++connections_taken_;
    if (!secret_.empty()) handshakes_ -= 1;
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
    Client& c = clients_[fd];
    c.deadline = monotonic_now() + kRequestBudget;
    if (!secret_.empty()) c.phase = Phase::hello;
    loop_.watch(fd, [this, fd] { on_client(fd); });
  }
  arm_expiry();
}

void RequestServer::on_client(int fd) {
  const auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = it->second;
  // Before the proof, only what the handshake's next step needs is read (control_auth.h).
  std::size_t want = 4096;
  if (c.phase == Phase::hello) want = control_auth::kHelloLineBytes - c.request.size();
  if (c.phase == Phase::proof) want = control_auth::kProofBytes - c.request.size();
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, std::min(want, sizeof buffer));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n < 0 || (n == 0 && c.phase != Phase::request)) return close_client(fd);
  if (n > 0) {
    c.request.append(buffer, static_cast<std::size_t>(n));
    if (c.phase != Phase::request) bytes_before_proof_ += static_cast<std::uint64_t>(n);
  }
  if (c.phase == Phase::hello) return on_hello(fd, c);
  if (c.phase == Phase::proof) return on_proof(fd, c);
  const bool whole = n == 0 || c.request.find('\n') != std::string::npos;
  if (!whole && c.request.size() < kMaxRequestBytes) return;
  if (c.request.size() > kMaxRequestBytes) c.request.resize(kMaxRequestBytes);
  answer_request(fd, c);
}

void RequestServer::on_hello(int fd, Client& c) {
  if (c.request.size() < control_auth::kHelloLineBytes && c.request.find('\n') == std::string::npos)
    return;
  const std::size_t end = c.request.find('\n');
  c.caller_nonce = control_auth::nonce_of_hello(std::string_view(c.request).substr(0, end));
  c.address = control_auth::socket_address(fd, true);
  if (c.caller_nonce.empty() || c.address.empty())
    return refuse(fd, "this daemon's TCP control needs its secret: it speaks the handshake of "
                      "runtime/control_auth.h (atp ctl --secret-file, the controller's "
                      "--daemon-secret-file)");
  c.daemon_nonce = control_auth::fresh_nonce();
  answer_without_waiting(fd, c.daemon_nonce + " " +
                                 control_auth::mac(secret_, control_auth::Role::server, c.address,
                                                   c.caller_nonce, c.daemon_nonce) + "\n");
  c.request.clear();
  c.phase = Phase::proof;
}

void RequestServer::on_proof(int fd, Client& c) {
  if (c.request.size() < control_auth::kProofBytes) return;
  const std::string_view proof = std::string_view(c.request).substr(0, control_auth::kMacChars);
  if (c.request.back() != ' ' ||
      !control_auth::verify(proof, secret_, control_auth::Role::client, c.address, c.caller_nonce,
                            c.daemon_nonce))
    return refuse(fd, "this daemon's control needs its secret");
  c.request.clear();
  c.phase = Phase::request;
}

// The request's bytes to `respond_`; with a secret, only when its MAC holds, and the answer
// goes back with its own.
void RequestServer::answer_request(int fd, Client& c) {
  if (secret_.empty()) {
    answer_without_waiting(fd, respond_(c.request));
    return close_client(fd);
  }
  std::string_view line(c.request);
  line = line.substr(0, line.find('\n'));
  const std::size_t space = line.find(' ');
  const std::string_view body = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  if (space != control_auth::kMacChars ||
      !control_auth::verify(line.substr(0, space), secret_, control_auth::Role::request, c.address,
                            c.caller_nonce, c.daemon_nonce, body))
    return refuse(fd, "the request's MAC does not hold");
  std::string answer = respond_(std::string(body));
  if (!answer.empty() && answer.back() == '\n') answer.pop_back();
  answer_without_waiting(fd, control_auth::mac(secret_, control_auth::Role::answer, c.address,
                                               c.caller_nonce, c.daemon_nonce, answer) +
                                 " " + answer + "\n");
  close_client(fd);
}

void RequestServer::refuse(int fd, const std::string& why) {
  ++refused_proofs_;
  answer_without_waiting(fd, nlohmann::json{{"ok", false}, {"error", why}}.dump() + "\n");
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

ControlSocket::ControlSocket(EventLoop& loop, std::string path, Handler handler, std::string secret)
    : path_(std::move(path)) {
  const bool tcp = is_tcp_control(path_);
  if (tcp && secret.empty())
    throw std::invalid_argument("a control socket on TCP (" + path_ + ") needs a secret");
  if (!tcp) secret.clear();  // a Unix socket's peer is checked by its uid
  sockaddr_storage a;
  socklen_t length = 0;
  const int fd = stream_socket(path_, a, length);
  const int one = 1;
  if (tcp) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  else ::unlink(path_.c_str());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), length) != 0 || ::listen(fd, 64) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "control socket " + path_);
  }
  server_ = std::make_unique<RequestServer>(
      loop, fd, [handler = std::move(handler)](const std::string& r) { return answer(handler, r); },
      std::move(secret));
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

namespace {

// A connection to a control socket, closed with it. Each step waits until the one deadline at
// most and throws std::system_error naming the socket.
class ControlConnection {
 public:
  ControlConnection(const std::string& path, Time deadline);
  ~ControlConnection() { ::close(fd_); }
  ControlConnection(const ControlConnection&) = delete;
  ControlConnection& operator=(const ControlConnection&) = delete;
  void send_all(std::string_view data);
  // Up to the first newline (without it); more than `most` bytes without one fails.
  std::string read_line(std::size_t most);
  std::string read_to_end();
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const std::string& what, int e) const {
    throw std::system_error(e, std::generic_category(), what + " " + path_);
  }
  bool read_some(std::string& into);
  void connect_to(const sockaddr_storage& a, socklen_t length);

  std::string path_;
  Time deadline_;
  int fd_;
};

ControlConnection::ControlConnection(const std::string& path, Time deadline)
    : path_(path), deadline_(deadline) {
  sockaddr_storage a;
  socklen_t length = 0;
  fd_ = stream_socket(path, a, length);
  try {
    connect_to(a, length);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void ControlConnection::connect_to(const sockaddr_storage& a, socklen_t length) {
  ::fcntl(fd_, F_SETFL, O_NONBLOCK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) fail("connect", errno);
    if (!wait_until(fd_, POLLOUT, deadline_)) fail("connect (no answer in time)", ETIMEDOUT);
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) fail("connect", error);
  }
  // A Unix socket path in a shared folder can be bound by anyone while its daemon is down: talk
  // only to a peer running as this user or root, or the request (a job's TOML and token) would
  // go to whoever squatted it.
  if (is_tcp_control(path_)) return;
  const std::optional<uid_t> uid = peer_uid(fd_);
  if (!uid) fail("peer credentials of", errno);
  if (!trusted(*uid))
    throw std::system_error(EPERM, std::generic_category(),
                            "the control socket " + path_ + " is served by uid " + std::to_string(*uid) +
                                ", neither this user nor root: nothing was sent to it (another "
                                "user may have bound its path)");
}

void ControlConnection::send_all(std::string_view data) {
  for (std::size_t done = 0; done < data.size();) {
    if (!wait_until(fd_, POLLOUT, deadline_)) fail("send (no room in time)", ETIMEDOUT);
    const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail("send", errno);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

// Appends what arrives next; false at the end of the stream.
bool ControlConnection::read_some(std::string& into) {
  char buffer[4096];
  for (;;) {
    if (!wait_until(fd_, POLLIN, deadline_)) fail("no whole answer in time from", ETIMEDOUT);
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n == 0) return false;
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail("read", errno);
    if (n > 0) {
      into.append(buffer, static_cast<std::size_t>(n));
      return true;
    }
  }
}

std::string ControlConnection::read_line(std::size_t most) {
  std::string line;
  while (line.find('\n') == std::string::npos && line.size() <= most && read_some(line)) {
  }
  const std::size_t end = line.find('\n');
  if (end == std::string::npos || end > most) fail("no handshake line from", EPROTO);
  return line.substr(0, end);
}

std::string ControlConnection::read_to_end() {
  std::string all;
  while (read_some(all)) {
  }
  return all;
}

// The TCP exchange of control_auth.h: the request leaves only once the daemon proved it holds
// `secret` for the address this connection reached, and its answer counts only with its MAC.
nlohmann::json authenticated_exchange(ControlConnection& c, const std::string& secret,
                                      const std::string& request) {
  using control_auth::Role;
  const std::string caller = control_auth::fresh_nonce();
  const std::string address = control_auth::socket_address(c.fd(), false);
  c.send_all(std::string(control_auth::kHello) + caller + "\n");
  const std::string line = c.read_line(control_auth::kNonceChars + 1 + control_auth::kMacChars);
  const std::string daemon = line.substr(0, control_auth::kNonceChars);
  const bool proven = line.size() == control_auth::kNonceChars + 1 + control_auth::kMacChars &&
                      line[control_auth::kNonceChars] == ' ' &&
                      control_auth::verify(std::string_view(line).substr(control_auth::kNonceChars + 1),
                                           secret, Role::server, address, caller, daemon);
  if (!proven)
    throw std::system_error(EACCES, std::generic_category(),
                            "the daemon at " + c.path() + " did not prove it holds the control "
                            "secret this caller holds (another secret, or not an ATP daemon): "
                            "nothing was sent to it");
  c.send_all(control_auth::mac(secret, Role::client, address, caller, daemon) + " " +
             control_auth::mac(secret, Role::request, address, caller, daemon, request) + " " +
             request + "\n");
  std::string answer = c.read_to_end();
  if (!answer.empty() && answer.back() == '\n') answer.pop_back();
  if (answer.starts_with("{")) return nlohmann::json::parse(answer);  // refused before answering
  const std::size_t space = answer.find(' ');
  const std::string_view body = space == std::string::npos ? std::string_view() : std::string_view(answer).substr(space + 1);
  if (space != control_auth::kMacChars ||
      !control_auth::verify(std::string_view(answer).substr(0, space), secret, Role::answer,
                            address, caller, daemon, body))
    throw std::system_error(EPROTO, std::generic_category(),
                            "the answer from " + c.path() + " does not carry its MAC");
  return nlohmann::json::parse(body);
}

}  // namespace

nlohmann::json control_request(const std::string& path, const nlohmann::json& request, Time budget,
                               const std::string& secret) {
  const bool tcp = is_tcp_control(path);
  if (tcp && secret.empty())
    throw std::invalid_argument("the control socket " + path + " is on TCP and needs its secret "
                                "(atp ctl --secret-file, the controller's --daemon-secret-file): "
                                "nothing was sent");
  ControlConnection c(path, monotonic_now() + budget);
  const std::string line = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (tcp) return authenticated_exchange(c, secret, line);
  c.send_all(line + "\n");
  return nlohmann::json::parse(c.read_to_end());
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
