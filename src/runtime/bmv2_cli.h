#pragma once
// simple_switch_CLI as a child process kept open for the agent's life: commands go to its
// stdin, and its answer is what it prints before the next prompt. Every read has a budget, so a
// CLI (or a switch behind it) that hangs fails the command instead of the caller's loop; a CLI
// that hung or exited is stopped, and a new one started for the next command.
#include <sys/types.h>

#include <string>
#include <vector>

#include "engines/common.h"
#include "runtime/switch_cli.h"

namespace atp::runtime {

class Bmv2Cli final : public SwitchCli {
 public:
  static constexpr Duration kAnswerBudget = 10 * kSecond;

  // Starts `program` (simple_switch_CLI) on thrift port `thrift_port` and waits for its first
  // prompt; throws SwitchCliError with what it printed if it exits first (no switch there).
  Bmv2Cli(const std::string& program, std::uint16_t thrift_port,
          Duration answer_budget = kAnswerBudget);
  ~Bmv2Cli() override;
  Bmv2Cli(const Bmv2Cli&) = delete;
  Bmv2Cli& operator=(const Bmv2Cli&) = delete;

  std::string run(const std::string& command) override;

 private:
  // The session cannot go on (no answer in time, or the CLI is gone).
  struct Broken : SwitchCliError {
    using SwitchCliError::SwitchCliError;
  };
  void start();
  std::string exchange(const std::string& command);
  std::string read_to_prompt(const std::string& waiting_for);
  void stop();

  std::string program_;
  std::uint16_t thrift_port_;
  Duration answer_budget_;
  pid_t pid_ = -1;
  int to_cli_ = -1, from_cli_ = -1;
};

// Whether a simple_switch_CLI answer says the command failed ("Error: ...", "Invalid ...",
// "*** Unknown syntax ...").
bool bmv2_answer_failed(const std::string& answer);

}  // namespace atp::runtime
