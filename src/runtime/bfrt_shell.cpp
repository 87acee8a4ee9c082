#include "runtime/bfrt_shell.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "runtime/child_process.h"
#include "runtime/event_loop.h"

namespace atp::runtime {

bool bfrt_answer_failed(const std::string& answer) {
  return some_line_starts_with(answer, {"Error", "Traceback (most recent call last)"});
}

BfrtShell::BfrtShell(std::vector<std::string> command, Duration budget)
    : command_(std::move(command)), budget_(budget) {
  if (command_.empty() || command_.front().empty())
    throw std::invalid_argument("the bfrt shell command is empty");
}

std::string BfrtShell::run_script(const std::string& path) const {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw SwitchCliError(std::string("pipe: ") + std::strerror(errno));
  const int no_input = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (no_input < 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw SwitchCliError(std::string("/dev/null: ") + std::strerror(errno));
  }
  std::vector<std::string> argv = command_;
  argv.push_back(path);
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(argv, no_input, out[1]);
  ::close(out[1]);
  ::close(no_input);
  if (pid < 0) {
    ::close(out[0]);
    throw SwitchCliError(std::string("fork: ") + std::strerror(errno));
  }
  const std::string what = "bfrt script " + path + " (" + command_.front() + ")";
  const Time deadline = monotonic_now() + budget_;
  std::string output;
  const auto out_of_budget = [&] {
    return SwitchCliError(what + ": not done within " + std::to_string(budget_ / kSecond) +
                          " s, stopped: " + output);
  };
  for (;;) {
    const Time left = deadline - monotonic_now();
    pollfd p{out[0], POLLIN, 0};
    const int ready = left > 0 ? ::poll(&p, 1, static_cast<int>(left / kMillisecond) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      kill_child(pid);
      ::close(out[0]);
      throw out_of_budget();
    }
    char buffer[65536];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the shell (and whatever it started) closed its output
    output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  // A shell that closed its output may still run: it gets what is left of the budget.
  const std::optional<int> waited = wait_child(pid, deadline);
  if (!waited) throw out_of_budget();
  const int status = *waited;
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!exited_ok || bfrt_answer_failed(output))
    throw SwitchCliError(what + (exited_ok ? " reported a failure: " : " failed (exit " +
                                 std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                                 "): ") + output);
  return output;
}

}  // namespace atp::runtime
