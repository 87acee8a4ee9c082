#include "daemons/p4_switch_agent.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include <charconv>

#include "engines/switch/switch_pipeline.h"

namespace atp::daemons {

namespace {

// The P4 program's next steps in its AtpIngress.next_steps counter, indexed as engines::NextStep
// (p4/common/constants.p4, STEP_*).
constexpr const char* kNextSteps[] = {"drop_malformed", "drop_unknown_job", "drop_forged",
                                      "pass_up",        "collide_up",       "absorb",
                                      "drop_duplicate", "emit_sum",         "flush_up",
                                      "multicast_down", "join_up",          "answer_down"};
static_assert(std::size(kNextSteps) == static_cast<std::size_t>(engines::NextStep::answer_down) + 1);

}  // namespace

std::uint64_t number_after(const std::string& answer, const std::string& marker,
                           const std::string& command) {
  const std::size_t at = answer.find(marker);
  std::uint64_t value = 0;
  if (at != std::string::npos) {
    const char* first = answer.data() + at + marker.size();
    while (first < answer.data() + answer.size() && *first == ' ') ++first;
    if (std::from_chars(first, answer.data() + answer.size(), value).ec == std::errc{}) return value;
  }
  throw runtime::SwitchCliError("'" + command + "': no \"" + marker + "\" number in its answer: " + answer);
}

P4SwitchAgent::P4SwitchAgent(const control::ClusterConfig& fabric, const std::string& name,
                             std::unique_ptr<runtime::SwitchCli> cli, const control::P4Limits& limits)
    : book_(fabric, name, limits), cli_(std::move(cli)), started_(runtime::monotonic_now()) {
  for (const std::string& command : control::bmv2_commands(book_.base())) cli_->run(command);
  for (const auto& [id, entries] : book_.file_jobs()) install(id, entries);
}

void P4SwitchAgent::attach(runtime::EventLoop& loop) {
  const Duration period = book_.profile().stale_after / 8;
  tick_timer_ = loop.add_timer([this, &loop, period] {
    tick(runtime::monotonic_now());
    loop.arm(tick_timer_, runtime::monotonic_now() + period);
  });
  loop.arm(tick_timer_, runtime::monotonic_now());
  learn_timer_ = loop.add_timer([this, &loop] {
    retry_deletes();
    learn_members(runtime::monotonic_now());
    loop.arm(learn_timer_, runtime::monotonic_now() + kLearnPeriod);
  });
  loop.arm(learn_timer_, runtime::monotonic_now() + kLearnPeriod);
}

bool P4SwitchAgent::learn_members(Time now) {
  bool unheard = false;
  for (auto& [id, job] : jobs_) {
    bool first_heard = false;
    for (Member& m : job.members) {
      if (m.heard) continue;
      if (now >= m.next_read) {
        const std::string command = "register_read AtpIngress.heard " + std::to_string(m.slot);
        try {
          m.heard = number_after(cli_->run(command), "]=", command) != 0;
        } catch (const runtime::SwitchCliError& e) {
          spdlog::warn("p4 agent '{}': {}", name(), e.what());
        }
        first_heard |= m.heard;
        // A member that stays silent is read less and less often: one named but never there
        // (issue 49 item 6: 320 reads a second for 10 jobs of 32 silent workers) costs little.
        if (now - m.admitted >= kQuickLearning) m.wait = std::clamp(2 * m.wait, kSlowLearning, kSlowestLearning);
        m.next_read = now + m.wait;
      }
      unheard |= !m.heard;
    }
    if (first_heard) quicken_silent_members(job, now);
    job.node_stale |= first_heard;
    if (job.node_stale) update_node(job);
  }
  return unheard;
}

// A member was just heard: the job has started, so its silent members are read quickly again
// (they likely start about together), not after the long wait a job that started late built up.
void P4SwitchAgent::quicken_silent_members(Installed& job, Time now) {
  for (Member& m : job.members)
    if (!m.heard) {
      m.admitted = now;
      m.wait = 0;
      m.next_read = now;
    }
}

// The job's node gets every heard member; a refused update is tried again at the next poll.
void P4SwitchAgent::update_node(Installed& job) {
  if (job.groups.empty()) return;
  std::string update = "mc_node_update " + std::to_string(job.groups.front().second);
  for (const Member& m : job.members)
    if (m.heard) update += " " + std::to_string(m.port);
  try {
    cli_->run(update);
    job.node_stale = false;
  } catch (const runtime::SwitchCliError& e) {
    spdlog::error("p4 agent '{}': {}", name(), e.what());
  }
}

void P4SwitchAgent::tick(Time now) {
  const std::uint32_t epoch = engines::claim_clock(now - started_, book_.profile().stale_after).epoch;
  if (epoch == epoch_written_) return;
  try {
    cli_->run("register_write AtpIngress.claim_epoch 0 " + std::to_string(epoch));
    epoch_written_ = epoch;
    ++ticks_;
  } catch (const runtime::SwitchCliError& e) {
    // Said and counted, and tried again at the next tick: a clock that stops ticking takes no
    // stale aggregator over (docs/engines.md §2.2), so it must never stop unseen.
    ++tick_failures_;
    last_tick_error_ = e.what();
    spdlog::error("p4 agent '{}': claim epoch {} not written ({} failures): {}", name(),
                  epoch, tick_failures_, e.what());
  }
}

std::vector<std::uint32_t> P4SwitchAgent::job_ids() const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, installed] : jobs_) ids.push_back(id);
  return ids;
}

// A job already here is replaced, as `atp switch` replaces it: the new entries are derived
// (and checked) first, then the old ones deleted and the new ones added.
void P4SwitchAgent::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  const control::P4Entries entries = book_.plan(cluster, job);
  if (const auto old = jobs_.find(job); old != jobs_.end()) {
    uninstall(old->second);
    jobs_.erase(old);
  }
  try {
    install(job, entries);
  } catch (...) {
    book_.release(job);
    throw;
  }
}

bool P4SwitchAgent::remove_job(std::uint32_t job) {
  const auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  uninstall(it->second);
  jobs_.erase(it);
  book_.release(job);
  return true;
}

// Every entry is added and its handle kept; if the switch refuses one, what was added is
// deleted again and the refusal thrown.
void P4SwitchAgent::install(std::uint32_t job, const control::P4Entries& entries) {
  retry_deletes();  // an entry left from a refused delete would refuse the same key now
  Installed done;
  try {
    // A slot another job used may say heard: cleared before any entry can set it.
    const Time now = runtime::monotonic_now();
    for (const control::P4MulticastGroup& g : entries.groups)
      for (std::size_t k = 0; k < g.ports.size(); ++k) {
        cli_->run("register_write AtpIngress.heard " + std::to_string(g.slots.at(k)) + " 0");
        done.members.push_back({g.ports[k], g.slots[k], false, now, now});
      }
    for (const control::P4TableEntry& e : entries.tables) {
      const std::string command = control::bmv2_command(e);
      done.entries.emplace_back(e.table, number_after(cli_->run(command), "with handle", command));
    }
    for (const control::P4MulticastGroup& g : entries.groups) add_group(g, done);
  } catch (...) {
    uninstall(done);
    throw;
  }
  jobs_[job] = std::move(done);
}

// The group starts with a node of no port: learn_members adds each member once heard.
void P4SwitchAgent::add_group(const control::P4MulticastGroup& group, Installed& done) {
  const std::string id = std::to_string(group.group);
  cli_->run("mc_mgrp_create " + id);
  done.groups.emplace_back(group.group, ~std::uint64_t{0});  // created, no node yet
  const std::string create = "mc_node_create " + id;
  const std::uint64_t node = number_after(cli_->run(create), "with handle", create);
  done.groups.back().second = node;
  cli_->run("mc_node_associate " + id + " " + std::to_string(node));
}

// Deletes what `installed` names, newest first. A delete the switch refuses is kept for
// retry_deletes (the job is gone from the agent either way: nothing refers to it any more).
void P4SwitchAgent::uninstall(const Installed& installed) {
  for (auto g = installed.groups.rbegin(); g != installed.groups.rend(); ++g) {
    const std::string id = std::to_string(g->first);
    if (g->second != ~std::uint64_t{0}) {
      delete_or_keep("mc_node_dissociate " + id + " " + std::to_string(g->second));
      delete_or_keep("mc_node_destroy " + std::to_string(g->second));
    }
    delete_or_keep("mc_mgrp_destroy " + id);
  }
  for (auto e = installed.entries.rbegin(); e != installed.entries.rend(); ++e)
    delete_or_keep("table_delete " + e->first + " " + std::to_string(e->second));
}

void P4SwitchAgent::delete_or_keep(const std::string& command) {
  try {
    cli_->run(command);
  } catch (const runtime::SwitchCliError& e) {
    // The switch no longer has it (INVALID_HANDLE, INVALID_MGID, ...): nothing to retry.
    if (std::string(e.what()).find("(INVALID_") != std::string::npos) return;
    spdlog::error("p4 agent '{}': {}; tried again later", name(), e.what());
    pending_deletes_.push_back(command);
  }
}

std::size_t P4SwitchAgent::retry_deletes() {
  std::vector<std::string> pending;
  pending.swap(pending_deletes_);
  for (const std::string& command : pending) delete_or_keep(command);
  return pending_deletes_.size();
}

nlohmann::json P4SwitchAgent::stats() {
  nlohmann::json jobs = nlohmann::json::object();
  for (const auto& [id, installed] : jobs_) {
    std::size_t heard = 0;
    for (const Member& m : installed.members) heard += m.heard ? 1 : 0;
    nlohmann::json job = {{"entries", installed.entries.size()},
                          {"members", installed.members.size()},
                          {"members_heard", heard}};
    if (const auto slice = book_.slice_of(id)) job["static_slice"] = {slice->first, slice->count};
    jobs[std::to_string(id)] = job;
  }
  nlohmann::json steps = nlohmann::json::object();
  for (std::size_t i = 0; i < std::size(kNextSteps); ++i) {
    const std::string command = "counter_read AtpIngress.next_steps " + std::to_string(i);
    try {  // "AtpIngress.next_steps[i]=  (B bytes, P packets)"
      steps[kNextSteps[i]] = number_after(cli_->run(command), "bytes,", command);
    } catch (const runtime::SwitchCliError& e) {
      steps[kNextSteps[i]] = nullptr;
      spdlog::warn("p4 agent '{}': {}", name(), e.what());
    }
  }
  return {{"jobs", jobs},
          {"next_steps", steps},
          {"pending_deletes", pending_deletes_.size()},
          {"claim_clock", {{"epoch", epoch_written_}, {"ticks", ticks_}, {"failures", tick_failures_},
                           {"last_error", last_tick_error_}}}};
}

}  // namespace atp::daemons
