#include "runtime/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/event_loop.h"

namespace atp::runtime {

void exec_child(const std::vector<std::string>& argv, int in, int out) {
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setpgid(0, 0);
  ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const std::string why = argv[0] + ": " + std::strerror(errno) + "\n";
  [[maybe_unused]] auto written = ::write(STDOUT_FILENO, why.data(), why.size());
  ::_exit(127);
}

std::optional<int> wait_child(int pid, Time deadline) {
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return 0;
    if (monotonic_now() > deadline) {
      kill_child(pid);
      return std::nullopt;
    }
    ::usleep(10'000);
  }
}

void kill_child(int pid) {
  if (pid <= 0) return;
  if (::kill(-pid, SIGKILL) != 0) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace atp::runtime
