#include "daemons/tofino_switch_agent.h"

#include <fstream>
#include <stdexcept>

#include "runtime/switch_cli.h"

namespace atp::daemons {

TofinoSwitchAgent::TofinoSwitchAgent(const control::ClusterConfig& fabric, const std::string& name,
                                     ScriptRunner run, std::string script_dir, std::string program)
    : book_(fabric, name, control::P4Limits::tofino()), run_(std::move(run)),
      dir_(std::move(script_dir)), program_(std::move(program)) {
  control::P4Entries start = book_.base();
  auto jobs = book_.file_jobs();
  for (const auto& [id, entries] : jobs) start.append(entries);
  run_script("start", control::bfrt_python_script(start, program_));
  for (auto& [id, entries] : jobs) jobs_[id] = std::move(entries);
}

void TofinoSwitchAgent::run_script(const std::string& what, const std::string& script) {
  const std::string path = dir_ + "/" + name() + "-" + std::to_string(++scripts_) + "-" + what + ".py";
  {
    std::ofstream file(path);
    file << script;
    if (!file.flush())
      throw std::runtime_error("p4 agent '" + name() + "': cannot write " + path);
  }
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

// A job already here is deleted first (bfrt refuses a key it has): if that fails, it keeps
// what it held; if its new entries are then refused, it is left out, as a new job would be.
void TofinoSwitchAgent::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  const auto old = jobs_.find(job);
  if (old != jobs_.end())
    run_script("job" + std::to_string(job) + "-remove",
               control::bfrt_python_script(old->second, program_, true));
  control::P4Entries entries;
  try {
    entries = book_.plan(cluster, job);
    run_script("job" + std::to_string(job) + "-add", control::bfrt_python_script(entries, program_));
  } catch (...) {
    if (old != jobs_.end()) jobs_.erase(old);  // its entries were deleted above
    book_.release(job);
    throw;
  }
  jobs_[job] = std::move(entries);
}

bool TofinoSwitchAgent::remove_job(std::uint32_t job) {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  run_script("job" + std::to_string(job) + "-remove",
             control::bfrt_python_script(it->second, program_, true));
  jobs_.erase(it);
  book_.release(job);
  return true;
}

nlohmann::json TofinoSwitchAgent::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  for (const auto& [id, entries] : jobs_) {
    nlohmann::json j = {{"entries", entries.tables.size()}, {"groups", entries.groups.size()}};
    if (const auto slice = book_.slice_of(id)) j["static_slice"] = {slice->first, slice->count};
    jobs[std::to_string(id)] = j;
  }
  return {{"jobs", jobs},
          {"scripts", {{"run", scripts_}, {"failed", failures_}, {"last_error", last_error_},
                       {"folder", dir_}}}};
}

}  // namespace atp::daemons
