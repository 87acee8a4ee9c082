#include "daemons/tofino_switch_agent.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <stdexcept>

#include "control/private_file.h"
#include "runtime/switch_cli.h"

namespace atp::daemons {

namespace {

// The number of the newest script of switch `name` in `dir` (0: none): a restarted agent
// numbers on from it, so the folder keeps every change.
std::uint64_t newest_script(const std::string& dir, const std::string& name) {
  std::uint64_t newest = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(name + "-")) continue;
    std::uint64_t n = 0;
    const char* first = file.data() + name.size() + 1;
    if (std::from_chars(first, file.data() + file.size(), n).ec == std::errc{})
      newest = std::max(newest, n);
  }
  return newest;
}

}  // namespace

TofinoSwitchAgent::TofinoSwitchAgent(const control::ClusterConfig& fabric, const std::string& name,
                                     ScriptRunner run, std::string script_dir, std::string program)
    : book_(fabric, name, control::P4Limits::tofino()), run_(std::move(run)),
      dir_(checked_folder(std::move(script_dir), name)), program_(std::move(program)),
      scripts_(newest_script(dir_, name)) {
  control::P4Entries start = book_.base();
  auto jobs = book_.file_jobs();
  for (const auto& [id, entries] : jobs) start.append(entries);
  // The claim clock runs for as long as the switch does, in a session of its own: a script
  // that only starts it (run with the SDE's shell, it never ends). The start script defines it
  // too, unstarted, as `atp p4 config` prints it.
  control::P4Entries clock;
  clock.stale_after = start.stale_after;
  write_script(dir_ + "/" + name + "-claim-clock.py",
               control::bfrt_python_script(clock, program_) + "claim_clock_forever()\n");
  run_script("start", control::bfrt_python_script(start, program_));
  for (auto& [id, entries] : jobs) {
    jobs_[id] = std::move(entries);
    admissions_[id] = scripts_;
  }
  // Member learning, likewise in a session of its own, over the file the agent keeps current.
  write_members();
  write_script(dir_ + "/" + name + "-learn-members.py",
               "p4 = bfrt." + program_ + ".pipe\n" + control::bfrt_heartbeat_helper() +
                   control::bfrt_member_learner(nlohmann::json::object()) +
                   "learn_members_forever(members_file=\"" + dir_ + "/" + name +
                   "-members.json\")\n");
}

void TofinoSwitchAgent::write_members() const {
  nlohmann::json members = nlohmann::json::object();
  for (const auto& [id, entries] : jobs_)
    members.update(control::bfrt_members(entries.groups, admissions_.at(id)));
  write_script(dir_ + "/" + name() + "-members.json", members.dump() + "\n");
}

// Scripts carry every job's wire token, and the bfrt shell runs as root whatever they say: the
// folder must be this user's alone, and each script is created 0600, never an existing file or
// link (control::write_private_file). A shared folder let any local user read the tokens, plant
// a link that made the agent overwrite a root-only file, or append a line the shell then ran.
std::string TofinoSwitchAgent::checked_folder(std::string dir, const std::string& name) {
  control::check_private_folder(dir, "p4 agent '" + name + "': --script-dir");
  return dir;
}

void TofinoSwitchAgent::write_script(const std::string& path, const std::string& script) const {
  try {
    control::write_private_file(path, script);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("p4 agent '" + name() + "': " + e.what());
  }
}

void TofinoSwitchAgent::run_script(const std::string& what, const std::string& script) {
  const std::string path = dir_ + "/" + name() + "-" + std::to_string(++scripts_) + "-" + what + ".py";
  write_script(path, script);
  ++scripts_run_;
  try {
    run_(path);
  } catch (const runtime::SwitchCliError& e) {
    ++failures_;
    last_error_ = e.what();
    throw;
  }
}

std::vector<std::uint32_t> TofinoSwitchAgent::job_ids() const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, entries] : jobs_) ids.push_back(id);
  return ids;
}

// The new entries are derived (and checked) before the switch is touched: refused, the job
// keeps what it held. A job already here is deleted first (bfrt refuses a key it has); if that
// fails, the job is forgotten (delete_job).
void TofinoSwitchAgent::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  control::P4Entries entries = book_.plan(cluster, job);
  if (jobs_.contains(job)) {
    try {
      delete_job(job);
    } catch (...) {
      book_.release(job);
      throw;
    }
  }
  const std::string tag = "job" + std::to_string(job);
  try {
    run_script(tag + "-add", control::bfrt_python_script(entries, program_));
  } catch (const runtime::SwitchCliError& e) {
    // What ran before the failing line stays on the switch: deleted again, as far as it goes,
    // so that the next admission finds no key of this one.
    try {
      run_script(tag + "-undo", control::bfrt_python_script(entries, program_, true));
    } catch (const runtime::SwitchCliError&) {
    }
    book_.release(job);
    throw;
  }
  jobs_[job] = std::move(entries);
  admissions_[job] = scripts_;
  write_members();
}

bool TofinoSwitchAgent::remove_job(std::uint32_t job) {
  if (!jobs_.contains(job)) return false;
  book_.release(job);  // forgotten whether or not its delete script succeeds (delete_job)
  delete_job(job);
  return true;
}

// A delete script that fails partway has deleted some keys: run again, it would fail on those
// forever. The job is forgotten either way, and the error names the script, whose remaining
// lines an operator can run by hand.
void TofinoSwitchAgent::delete_job(std::uint32_t job) {
  const control::P4Entries entries = std::move(jobs_.at(job));
  jobs_.erase(job);
  admissions_.erase(job);
  write_members();  // the learner leaves the group before it goes
  run_script("job" + std::to_string(job) + "-remove",
             control::bfrt_python_script(entries, program_, true));
}

nlohmann::json TofinoSwitchAgent::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  for (const auto& [id, entries] : jobs_) {
    nlohmann::json j = {{"entries", entries.tables.size()}, {"groups", entries.groups.size()}};
    if (const auto slice = book_.slice_of(id)) j["static_slice"] = {slice->first, slice->count};
    jobs[std::to_string(id)] = j;
  }
  // Counts at the top level: the metrics endpoint exports those (and jobs.*).
  return {{"jobs", jobs},
          {"scripts_run", scripts_run_},
          {"scripts_failed", failures_},
          {"last_error", last_error_},
          {"script_folder", dir_}};
}

}  // namespace atp::daemons
