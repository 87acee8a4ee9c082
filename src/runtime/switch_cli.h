#pragma once
// A P4 switch's runtime command line, one command at a time: what `atp p4 agent` programs a
// switch through. Bmv2Cli (bmv2_cli.h) is simple_switch_CLI; tests use a fake.
#include <stdexcept>
#include <string>

namespace atp::runtime {

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
