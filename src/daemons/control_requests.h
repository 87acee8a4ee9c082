#pragma once
// What `atp ctl` can ask a running daemon, answered the same way by the switch and the PS:
//   {"cmd":"list"}                              -> {"ok":true,"jobs":[...]}
//   {"cmd":"stats"}                             -> {"ok":true,"stats":{...}}
//   {"cmd":"admit","config":PATH,"job":ID}      -> installs job ID as that cluster file derives it
//   {"cmd":"admit","jobs":TOML,"job":ID}        -> the same from [[job]] tables over the daemon's
//                                                  own fabric (what the controller sends)
//   {"cmd":"remove","job":ID}                   -> removes it (a switch frees its aggregators)
//   {"cmd":"home","job":ID,"first":F,"count":C} -> a PS plans the job's seqs on aggregators
//                                                  [F, F + C) from now on (the controller lends
//                                                  idle blocks of the pool: home_lending.h)
// Over TCP the caller first proves it holds the daemon's control secret (runtime/control_auth.h).
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "control/cluster_config.h"
#include "control/slice_allocator.h"

namespace atp::daemons {

// The request's `key`: a whole number within 32 bits. (get<uint32_t> alone would wrap 2^32 + 1
// onto 1: a request naming job 2^32 + 1 once removed job 1.)
inline std::uint32_t u32_of(const nlohmann::json& request, const char* key, const char* what) {
  const auto it = request.find(key);
  const bool whole = it != request.end() && it->is_number_integer();
  if (!whole || (it->is_number_unsigned() ? it->get<std::uint64_t>() > 0xFFFFFFFFu
                                          : it->get<std::int64_t>() < 0 ||
                                                it->get<std::int64_t>() > 0xFFFFFFFF))
    throw std::invalid_argument("\"" + std::string(key) + "\" must be " + what + " from 0 to 4294967295");
  return it->get<std::uint32_t>();
}
inline std::uint32_t job_of(const nlohmann::json& request) { return u32_of(request, "job", "a job id"); }

template <typename Daemon>
nlohmann::json answer_control(Daemon& daemon, const nlohmann::json& request) {
  const std::string cmd = request.value("cmd", "");
  if (cmd == "list") return {{"ok", true}, {"jobs", daemon.job_ids()}};
  if (cmd == "stats") return {{"ok", true}, {"stats", daemon.stats()}};
  if (cmd == "remove") {
    const std::uint32_t job = job_of(request);
    if (daemon.remove_job(job)) return {{"ok", true}};
    return {{"ok", false}, {"error", "no job " + std::to_string(job)}};
  }
  if (cmd == "admit") {
    const std::uint32_t job = job_of(request);
    if (request.contains("jobs"))
      daemon.admit(daemon.fabric().with_jobs_from(request.at("jobs").get<std::string>(), "admit"), job);
    else
      daemon.admit(control::ClusterConfig::load(request.at("config").get<std::string>()), job);
    return {{"ok", true}};
  }
  if (cmd == "home") {
    if constexpr (requires { daemon.set_home(0u, control::Slice{}); }) {
      daemon.set_home(job_of(request), {u32_of(request, "first", "an aggregator index"),
                                        u32_of(request, "count", "a number of aggregators")});
      return {{"ok", true}};
    } else {
      return {{"ok", false}, {"error", "only a parameter server plans a job's home"}};
    }
  }
  return {{"ok", false}, {"error", "unknown command '" + cmd + "' (list, stats, admit, remove, home)"}};
}

}  // namespace atp::daemons
