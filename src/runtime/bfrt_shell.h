#pragma once
// A Tofino's bfrt_python shell, one script at a time: `atp p4 agent --target tofino` programs
// the switch through it. The command is the SDE's shell in batch mode (for example
// "$SDE/run_bfshell.sh -b"), the script's path appended; each script runs within a budget.
#include <string>
#include <vector>

#include "engines/common.h"
#include "runtime/switch_cli.h"

namespace atp::runtime {

// An answer of bfrt_python that reports a failure: a line starting "Error" or a Python
// traceback (the shell may exit 0 after a script whose statement failed).
bool bfrt_answer_failed(const std::string& answer);

class BfrtShell {
 public:
  static constexpr Duration kScriptBudget = 120 * kSecond;

  // `command`: the program and its arguments, before the script's path. Throws
  // std::invalid_argument when it is empty.
  explicit BfrtShell(std::vector<std::string> command, Duration budget = kScriptBudget);

  // Runs the script at `path`; returns what the shell printed. Throws SwitchCliError naming
  // the script, with that output, when the shell exits other than 0, reports a failure, or runs
  // past the budget (it is then killed with its process group).
  std::string run_script(const std::string& path) const;

 private:
  std::vector<std::string> command_;
  Duration budget_;
};

}  // namespace atp::runtime
