#include "controller/fabric_programmer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "controller/controller_error.h"
#include "runtime/event_loop.h"
#include "runtime/local_servers.h"

namespace atp::controller {

nlohmann::json FabricProgrammer::ask(const Daemon& d, nlohmann::json request, Time deadline) const {
  // The secret is proved over TCP, never sent (runtime/control_auth.h); a Unix socket's peer is
  // checked by its uid instead.
  try {
    const Time left = deadline - runtime::monotonic_now();
    if (left <= 0) throw std::runtime_error("the call's time was up before asking");
    return runtime::control_request(d.control, request, left,
                                    runtime::is_tcp_control(d.control) ? secret_ : std::string());
  } catch (const std::exception& e) {
    return {{"ok", false}, {"error", std::string("no answer on ") + d.control + ": " + e.what()},
            {"unreachable", true}};
  }
}

std::vector<Daemon> FabricProgrammer::daemons_of(const control::ClusterConfig& cluster,
                                                 std::uint32_t id) {
  std::vector<Daemon> out;
  for (const auto& ps : cluster.job(id).parameter_servers)
    out.push_back({ps, cluster.server_named(ps).control, true});
  for (proto::Level level : {proto::Level::spine, proto::Level::rack})
    for (const auto& s : cluster.switches()) {
      if (s.level != level) continue;
      runtime::AddressBook scratch;
      for (const auto& entry : cluster.switch_jobs(s.name, scratch))
        if (entry.job == id) out.push_back({s.name, s.control});
    }
  return out;
}

void FabricProgrammer::install(const control::ClusterConfig& cluster, std::uint32_t id,
                               const std::string& job_toml, Time deadline) {
  const auto daemons = daemons_of(cluster, id);
  for (std::size_t i = 0; i < daemons.size(); ++i) {
    const Time step = daemons[i].is_server
                          ? std::min(deadline, runtime::monotonic_now() + kServerStepBudget)
                          : deadline;
    const auto reply = ask(daemons[i], {{"cmd", "admit"}, {"jobs", job_toml}, {"job", id}}, step);
    if (reply.value("ok", false)) continue;
    const bool unreachable = reply.contains("unreachable");
    // The failing daemon too: one that timed out may have installed the job all the same (or
    // will, if stopped: the removal queued behind the admission undoes it when it resumes).
    for (std::size_t k = 0; k <= i; ++k) {
      const Time by = k == i && unreachable
                          ? std::min(deadline, runtime::monotonic_now() + kQueueBudget)
                          : deadline;
      if (!remove_from(daemons[k], id, by) && k < i)
        spdlog::warn("controller: rolling job {} back: {} did not remove it (the next "
                     "reconcile will)", id, daemons[k].name);
    }
    const std::string why = reply.value("error", std::string("no reason given"));
    if (unreachable) throw UnansweredDaemon(daemons[i].name, daemons[i].is_server, daemons[i].name + ": " + why);
    throw ControllerError(ControllerError::Kind::refused, daemons[i].name + " refused the job: " + why);
  }
}

std::vector<std::string> FabricProgrammer::uninstall(const control::ClusterConfig& cluster,
                                                     std::uint32_t id, Time deadline) {
  std::vector<std::string> unreachable;
  auto daemons = daemons_of(cluster, id);
  for (auto it = daemons.rbegin(); it != daemons.rend(); ++it)
    if (ask(*it, {{"cmd", "remove"}, {"job", id}}, deadline).contains("unreachable")) {
      spdlog::warn("controller: could not remove job {} from {}", id, it->name);
      unreachable.push_back(it->name);
    }
  return unreachable;
}

std::vector<Daemon> FabricProgrammer::all_daemons(const control::ClusterConfig& fabric) {
  std::vector<Daemon> out;
  for (const auto& ps : fabric.servers()) out.push_back({ps.name, ps.control, true});
  for (const auto& s : fabric.switches()) out.push_back({s.name, s.control});
  return out;
}

std::string FabricProgrammer::install_on(const Daemon& daemon, std::uint32_t id,
                                         const std::string& job_toml, Time deadline) {
  const auto reply = ask(daemon, {{"cmd", "admit"}, {"jobs", job_toml}, {"job", id}}, deadline);
  return reply.value("ok", false) ? "" : reply.value("error", std::string("no reason given"));
}

bool FabricProgrammer::remove_from(const Daemon& daemon, std::uint32_t id, Time deadline) {
  return ask(daemon, {{"cmd", "remove"}, {"job", id}}, deadline).value("ok", false);
}

std::optional<std::vector<std::uint32_t>> FabricProgrammer::listed(const Daemon& daemon, Time deadline) {
  const auto reply = ask(daemon, {{"cmd", "list"}}, deadline);
  if (!reply.value("ok", false)) return std::nullopt;
  return reply.at("jobs").get<std::vector<std::uint32_t>>();
}

bool FabricProgrammer::set_home(const control::ClusterConfig& cluster, std::uint32_t id,
                                const control::Slice& home, Time deadline,
                                std::set<std::string>& unanswered) {
  bool all = true;
  for (const auto& ps : cluster.job(id).parameter_servers) {
    if (unanswered.contains(ps)) {
      all = false;
      continue;
    }
    const Daemon d{ps, cluster.server_named(ps).control, true};
    const auto reply =
        ask(d, {{"cmd", "home"}, {"job", id}, {"first", home.first}, {"count", home.count}}, deadline);
    if (reply.value("ok", false)) continue;
    spdlog::warn("controller: job {}'s home [{}, +{}) not taken by {}: {}", id, home.first,
                 home.count, ps, reply.value("error", std::string("no reason given")));
    if (reply.contains("unreachable")) unanswered.insert(ps);
    all = false;
  }
  return all;
}

nlohmann::json FabricProgrammer::stats(const control::ClusterConfig& cluster, std::uint32_t id,
                                       Time deadline) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& d : daemons_of(cluster, id)) {
    const auto reply = ask(d, {{"cmd", "stats"}}, deadline);
    const auto key = std::to_string(id);
    if (!reply.value("ok", false))
      out[d.name] = {{"error", reply.value("error", std::string("no answer"))}};
    else if (reply["stats"]["jobs"].contains(key))
      out[d.name] = reply["stats"]["jobs"][key];
    else
      out[d.name] = {{"error", "does not hold the job"}};
  }
  return out;
}

}  // namespace atp::controller
