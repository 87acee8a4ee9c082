#pragma once
// `atp p4 agent --target tofino`: the control plane of one Tofino switch, beside it. It answers
// the controller's admissions and removals as the BMv2 agent does (control_requests.h), and
// turns each change into one bfrt_python script (control::bfrt_python_script, the script
// `atp p4 config --target tofino` prints) that it writes into its script folder and runs through
// the SDE's shell:
//  - at start: the profile, the IPv4 routes and the cluster file's jobs;
//  - admit: the job's entries and multicast group, derived before the switch is touched (a job
//    already here: its old ones deleted first); an add script the shell fails is undone as far
//    as it goes and leaves the job out, the error being the shell's output;
//  - remove: the job's entries deleted; a delete script that fails is reported and the job
//    forgotten (its remaining lines are in the folder).
// What it leaves to long-lived bfrt_python sessions of their own, whose scripts it writes: the
// claim clock (<switch>-claim-clock.py runs claim_clock_forever(); docs/p4.md) and member
// learning (<switch>-learn-members.py runs learn_members_forever() over <switch>-members.json,
// the members of every job here, which the agent rewrites after each admission and before
// each removal: a job's group starts with no port and gains each member once heard).
// Each script runs to its end before the next request is read: a shell slower than the
// controller's call budget (5 s) makes admissions time out there (docs/p4.md).
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemons/p4_job_book.h"
#include "runtime/event_loop.h"

namespace atp::daemons {

class TofinoSwitchAgent {
 public:
  // Runs the script at a path on the switch; throws runtime::SwitchCliError when it fails
  // (runtime::BfrtShell::run_script).
  using ScriptRunner = std::function<void(const std::string& path)>;

  // Writes and runs the start script; throws what the shell or the cluster file refused.
  TofinoSwitchAgent(const control::ClusterConfig& fabric, const std::string& name,
                    ScriptRunner run, std::string script_dir, std::string program = "atp");
  TofinoSwitchAgent(const TofinoSwitchAgent&) = delete;
  TofinoSwitchAgent& operator=(const TofinoSwitchAgent&) = delete;

  void attach(runtime::EventLoop&) {}  // nothing periodic: see the header comment

  nlohmann::json stats() const;
  const runtime::Endpoint& address() const { return book_.spec().address; }
  const std::string& name() const { return book_.spec().name; }
  const control::ClusterConfig& fabric() const { return book_.fabric(); }

  std::vector<std::uint32_t> job_ids() const;
  void admit(const control::ClusterConfig& cluster, std::uint32_t job);
  bool remove_job(std::uint32_t job);

 private:
  // Writes `script` to the folder as <switch>-<n>-<what>.py and runs it.
  void run_script(const std::string& what, const std::string& script);
  static std::string checked_folder(std::string dir, const std::string& name);
  void write_script(const std::string& path, const std::string& script) const;
  void delete_job(std::uint32_t job);
  // <switch>-members.json: each job's group and members, as learn_members_forever() reads them.
  void write_members() const;

  P4JobBook book_;
  ScriptRunner run_;
  std::string dir_, program_;
  std::map<std::uint32_t, control::P4Entries> jobs_;  // what each job's last script added
  std::map<std::uint32_t, std::uint64_t> admissions_;  // the number of that script
  std::uint64_t scripts_ = 0;  // the newest script's number in the folder
  std::uint64_t scripts_run_ = 0, failures_ = 0;
  std::string last_error_;
};

}  // namespace atp::daemons
