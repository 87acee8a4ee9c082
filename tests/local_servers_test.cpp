// The control socket shares a daemon's loop with its packets: no request, however malformed,
// slow or silent, may end the daemon or hold the loop; and asking a daemon that is stopped or
// answers a byte at a time costs the caller its budget, not more.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "runtime/local_servers.h"
#include "stuck_peer.h"

namespace atp::runtime {
namespace {

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_un a = testing::unix_socket_address(path);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server has answered or closed `fd` (it is readable), without waiting.
bool answered_or_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// A control socket on its own loop thread whose handler names the command it did not know, as
// the daemons' handler does.
class Served {
 public:
  explicit Served(std::string path) : path_(std::move(path)) {
    control_.emplace(loop_, path_, [](const nlohmann::json& r) {
      const std::string cmd = r.value("cmd", "");
      if (cmd == "ping") return nlohmann::json{{"ok", true}};
      return nlohmann::json{{"ok", false}, {"error", "unknown command '" + cmd + "'"}};
    });
    loop_.on_wake([] {});
    thread_ = std::thread([this] { loop_.run(); });
  }
  ~Served() {
    loop_.stop();
    loop_.wake();
    thread_.join();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  EventLoop loop_;
  std::optional<ControlSocket> control_;
  std::thread thread_;
};

// A request with a byte that is not UTF-8 came back in the error message, whose serialisation
// threw outside the handler's try: the daemon exited.
TEST(ControlSocket, BytesThatAreNotUtf8GetAnErrorAndTheDaemonGoesOn) {
  Served served("/tmp/atp-test-utf8.sock");
  for (const std::string bad : std::vector<std::string>{"{\"cmd\":\"\xff\"}\n", "\xfe\xff{\n", "{\"cmd\":\"\xc3\"}\n"}) {
    const int fd = connect_unix(served.path());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, bad.data(), bad.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bad.size()));
    std::string reply;
    char buffer[512];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) reply.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    const auto answer = nlohmann::json::parse(reply);  // valid JSON (and so valid UTF-8)
    EXPECT_FALSE(answer.at("ok").get<bool>());
  }
  EXPECT_TRUE(control_request(served.path(), {{"cmd", "ping"}}).at("ok").get<bool>());
}

// Slow-loris: each idle connection once held the loop for 20 ms, in turn, so a handful
// reconnecting starved the packets sharing it. Now a request is answered while idle clients
// wait, untouched, until their own budget ends.
TEST(ControlSocket, IdleAndTricklingClientsNeitherHoldTheLoopNorShutOthersOut) {
  Served served("/tmp/atp-test-loris.sock");
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(connect_unix(served.path()));
  const int trickling = connect_unix(served.path());
  ASSERT_GE(trickling, 0);
  ASSERT_EQ(::send(trickling, "{", 1, MSG_NOSIGNAL), 1);
  EXPECT_TRUE(control_request(served.path(), {{"cmd", "ping"}}).at("ok").get<bool>());
  // Answered before the clients that came first and sent nothing: they were not waited for.
  EXPECT_FALSE(answered_or_closed(idle.back()));
  EXPECT_FALSE(answered_or_closed(trickling));
  // At most RequestServer::kMaxClients stay open: the oldest were closed to make room.
  std::size_t closed = 0;
  for (int fd : idle) closed += answered_or_closed(fd);
  EXPECT_GE(closed, idle.size() + 1 - RequestServer::kMaxClients);
  // Once its budget is over, every client is closed.
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10'000), 1);
    ::close(fd);
  }
  ::close(trickling);
}

// A peer trickling a byte every few seconds once held control_request (and with it every
// controller call) for as long as it liked: each read had its own time-out.
TEST(ControlRequest, APeerThatTricklesCostsTheCallerItsBudgetOnly) {
  testing::StuckPeer trickler("/tmp/atp-test-trickler.sock", true);
  EXPECT_THROW(control_request("/tmp/atp-test-trickler.sock", {{"cmd", "list"}}, 300 * kMillisecond),
               std::system_error);
  EXPECT_EQ(trickler.accepted(), 1);  // it was the budget that ended the call, not a refused connect
}

// Socket squatting (issue 31 item 8): while a daemon is down, another local user can bind its
// control socket's path in the shared /tmp. The controller then sent the squatter a job's
// TOML with its token. A client now checks the peer's uid before sending anything, and the
// daemon's side refuses peers of other users the same way. Needs root (to be another user).
TEST(ControlRequest, NothingIsSentToASocketAnotherUserServes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the squatter as another user";
  const std::string path = "/tmp/atp-test-squatted.sock";
  ::unlink(path.c_str());
  int received[2];
  ASSERT_EQ(::pipe(received), 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t squatter = ::fork();
  if (squatter == 0) {  // nobody binds the path and reports what it is sent
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const sockaddr_un a = testing::unix_socket_address(path);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0)
      ::_exit(3);
    ::chmod(path.c_str(), 0777);
    (void)!::write(ready[1], "r", 1);
    const int client = ::accept(fd, nullptr, nullptr);
    char buffer[4096];
    std::int64_t total = 0;
    for (ssize_t n; (n = ::read(client, buffer, sizeof buffer)) > 0;) total += n;
    (void)!::write(received[1], &total, sizeof total);
    ::_exit(0);
  }
  char byte = 0;
  ::close(ready[1]);
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  try {
    control_request(path, {{"cmd", "admit"}, {"job_toml", "token = 1234"}}, kSecond);
    ADD_FAILURE() << "the request went to another user's socket";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EPERM);
    EXPECT_NE(std::string(e.what()).find("uid 65534"), std::string::npos) << e.what();
  }
  ::close(received[1]);  // the squatter's end: read ends if it dies without reporting
  std::int64_t total = -1;
  ASSERT_EQ(::read(received[0], &total, sizeof total), static_cast<ssize_t>(sizeof total));
  EXPECT_EQ(total, 0);  // not a byte of the request
  int status = 0;
  ::waitpid(squatter, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::unlink(path.c_str());
}

// And a daemon's control socket answers no peer running as another user.
TEST(ControlSocket, APeerOfAnotherUserIsNotAnswered) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  Served daemon("/tmp/atp-test-peer-uid.sock");
  ::chmod(daemon.path().c_str(), 0777);  // the file's mode would let anyone connect
  int answered[2];
  ASSERT_EQ(::pipe(answered), 0);
  const pid_t other = ::fork();
  if (other == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = connect_unix(daemon.path());
    if (fd < 0) ::_exit(3);
    char buffer[256];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);  // the refusal, sent at once
    if (n > 0) (void)!::write(answered[1], buffer, static_cast<std::size_t>(n));
    // A request after it is never answered: the connection is gone.
    (void)!::send(fd, "{\"cmd\":\"ping\"}\n", 15, MSG_NOSIGNAL);
    if (::read(fd, buffer, sizeof buffer) > 0) (void)!::write(answered[1], "ANSWERED", 8);
    ::_exit(0);
  }
  ::close(answered[1]);  // the child's end: a child that writes nothing ends the read
  std::string reply;
  char chunk[256];
  for (ssize_t n; (n = ::read(answered[0], chunk, sizeof chunk)) > 0;) reply.append(chunk, n);
  // A refusal naming why, and nothing the handler said.
  EXPECT_NE(reply.find("not uid 65534"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("\"ok\":true"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("ANSWERED"), std::string::npos) << reply;
  int status = 0;
  ::waitpid(other, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(control_request(daemon.path(), {{"cmd", "ping"}})["ok"], true);  // its own user is
}

// Every metric name is one Prometheus identifier, whatever the daemon's kind is called.
TEST(Metrics, AKindOfSeveralWordsMakesOneMetricName) {
  const std::string text = prometheus_text(
      "p4 agent", "rackA", {{"scripts_run", 3}, {"last_error", "x"}, {"jobs", {{"7", {{"entries", 10}}}}}});
  EXPECT_EQ(text,
            "atp_p4_agent_scripts_run{p4_agent=\"rackA\"} 3\n"
            "atp_p4_agent_job_entries{p4_agent=\"rackA\",job=\"7\"} 10\n");
}

}  // namespace
}  // namespace atp::runtime
