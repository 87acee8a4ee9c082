#pragma once
// A P4 switch's runtime command line, one command at a time: what `atp p4 agent` programs a
// switch through. Bmv2Cli (bmv2_cli.h) is simple_switch_CLI; tests use a fake.
#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

namespace atp::runtime {

// Whether a line of a runtime CLI's answer starts with one of `prefixes`: how the CLIs say a
// command failed (they may still exit 0).
inline bool some_line_starts_with(std::string_view answer,
                                  std::initializer_list<std::string_view> prefixes) {
  for (std::size_t at = 0; at < answer.size();) {
    const std::size_t end = std::min(answer.find('\n', at), answer.size());
    const std::string_view line = answer.substr(at, end - at);
    for (std::string_view prefix : prefixes)
      if (line.starts_with(prefix)) return true;
    at = end + 1;
  }
  return false;
}

// The switch refused a command, or its CLI is gone; what() has the command and the reason.
struct SwitchCliError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SwitchCli {
 public:
  virtual ~SwitchCli() = default;
  // Runs `command`; returns what it printed. Throws SwitchCliError when the switch says the
  // command failed, or the CLI does not answer within its budget.
  virtual std::string run(const std::string& command) = 0;
};

}  // namespace atp::runtime
