#pragma once
// A control-plane child process (a switch's runtime CLI or shell): how it starts and ends.
#include <optional>
#include <string>
#include <vector>

#include "engines/common.h"

namespace atp::runtime {

// In the child after fork(): no blocked signals (a daemon's loop blocks SIGINT and SIGTERM to
// read them from a signalfd, which a child must not inherit), a process group of its own (so
// that stopping it stops whatever it started), stdin from `in`, stdout and stderr to `out`,
// then argv[0] from PATH. If that fails, the reason goes to `out` and the child exits 127.
[[noreturn]] void exec_child(const std::vector<std::string>& argv, int in, int out);

// Kills the child's process group (the child alone if it has none) and reaps it.
void kill_child(int pid);

// Reaps the child by `deadline` (monotonic_now's clock), or kills it then (kill_child).
// Returns its wait status (0 if it cannot be waited for), or nothing if it was killed.
std::optional<int> wait_child(int pid, Time deadline);

}  // namespace atp::runtime
