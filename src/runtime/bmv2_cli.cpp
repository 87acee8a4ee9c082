#include "runtime/bmv2_cli.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/child_process.h"
#include "runtime/event_loop.h"

namespace atp::runtime {

namespace {

constexpr std::string_view kPrompt = "RuntimeCmd: ";

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

bool bmv2_answer_failed(const std::string& answer) {
  return some_line_starts_with(answer, {"Error", "Invalid", "*** Unknown syntax"});
}

Bmv2Cli::Bmv2Cli(const std::string& program, std::uint16_t thrift_port, Duration answer_budget)
    : program_(program), thrift_port_(thrift_port), answer_budget_(answer_budget) {
  start();
}

Bmv2Cli::~Bmv2Cli() { stop(); }

// Commands go over a socket pair rather than a pipe: a send to a CLI that died then fails with
// EPIPE (MSG_NOSIGNAL) instead of killing the agent with SIGPIPE.
void Bmv2Cli::start() {
  int to[2], from[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, to) != 0)
    throw SwitchCliError(std::string("socketpair: ") + std::strerror(errno));
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    throw SwitchCliError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_ = ::fork();
  if (pid_ == 0) exec_child({program_, "--thrift-port", std::to_string(thrift_port_)}, to[0], from[1]);
  ::close(to[0]);
  ::close(from[1]);
  to_cli_ = to[1];
  from_cli_ = from[0];
  if (pid_ < 0) {
    stop();
    throw SwitchCliError(std::string("fork: ") + std::strerror(errno));
  }
  try {
    read_to_prompt(program_ + " on thrift port " + std::to_string(thrift_port_));
  } catch (...) {
    stop();
    throw;
  }
}

// A CLI that timed out or exited is replaced before the next command: its late answer would
// otherwise be read as the next command's (and a handle taken from the wrong answer).
std::string Bmv2Cli::run(const std::string& command) {
  if (command.find('\n') != std::string::npos)
    throw SwitchCliError("'" + command + "': one command per line");
  if (pid_ < 0) start();
  try {
    return exchange(command);
  } catch (const Broken& e) {
    stop();
    throw SwitchCliError(e.what());
  }
}

std::string Bmv2Cli::exchange(const std::string& command) {
  const std::string line = command + "\n";
  for (std::size_t sent = 0; sent < line.size();) {
    const ssize_t n = ::send(to_cli_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Broken("'" + command + "': the CLI is gone (" + std::strerror(errno) + ")");
    sent += static_cast<std::size_t>(n);
  }
  std::string answer = read_to_prompt("'" + command + "'");
  if (bmv2_answer_failed(answer)) {
    while (!answer.empty() && (answer.back() == '\n' || answer.back() == ' ')) answer.pop_back();
    throw SwitchCliError("'" + command + "': " + answer);
  }
  return answer;
}

// Everything up to the next prompt, within the answer budget.
std::string Bmv2Cli::read_to_prompt(const std::string& waiting_for) {
  const Time deadline = monotonic_now() + answer_budget_;
  std::string out;
  while (!std::string_view(out).ends_with(kPrompt)) {
    const Time left = deadline - monotonic_now();
    pollfd p{from_cli_, POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left / kMillisecond) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0)
      throw Broken(waiting_for + ": no answer from simple_switch_CLI within " +
                           std::to_string(answer_budget_ / kMillisecond) + " ms");
    char buffer[65536];
    const ssize_t n = ::read(from_cli_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Broken(waiting_for + ": simple_switch_CLI exited: " + out);
    out.append(buffer, static_cast<std::size_t>(n));
  }
  out.resize(out.size() - kPrompt.size());
  return out;
}

// Closing its stdin ends the CLI; one that does not end within a second is killed.
void Bmv2Cli::stop() {
  close_fd(to_cli_);
  if (pid_ > 0) wait_child(pid_, monotonic_now() + kSecond);
  pid_ = -1;
  close_fd(from_cli_);
}

}  // namespace atp::runtime
