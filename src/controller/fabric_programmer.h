#pragma once
// How the controller programs the fabric: it sends each switch and PS on a job's path the
// job's [[job]] table over its control socket (daemons/control_requests.h), which the daemon
// reads over its own copy of the fabric. A P4 switch would take the entries `atp p4 config`
// derives from the same ClusterConfig through its own runtime API in the same place.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "control/cluster_config.h"

namespace atp::controller {

struct Daemon {
  std::string name;
  std::string control;  // its control socket
  bool is_server = false;
};

// A PS answers an admission from memory at once (a switch may program hardware): one that
// takes longer counts as unanswered, leaving the admission time to try another PS.
inline constexpr Duration kServerStepBudget = 1 * kSecond;
// What a request to a daemon that did not answer gets to be queued on its socket (a stopped
// daemon that resumes runs it; the rollback's removal after its admission, say).
inline constexpr Duration kQueueBudget = kSecond / 4;

// Every call takes a deadline (monotonic time): a daemon that is stopped or answers a byte at a
// time counts as unreachable once it passes, so no call outlasts it by more than a connect.
class FabricProgrammer {
 public:
  // `secret`: the daemons' control secret, which a daemon controlled over TCP and this
  // controller prove to each other on each request (runtime/control_auth.h; never sent).
  explicit FabricProgrammer(std::string secret = {}) : secret_(std::move(secret)) {}

  // The switches and PSs that serve job `id` of `cluster`: PSs first, then switches from the
  // top down (the order results flow in).
  static std::vector<Daemon> daemons_of(const control::ClusterConfig& cluster, std::uint32_t id);

  // Installs the job on each daemon; if one refuses or does not answer, removes it from those
  // already done and throws ControllerError naming the daemon and its reason (UnansweredDaemon
  // when it did not answer: a PS within kServerStepBudget, a switch by `deadline`).
  void install(const control::ClusterConfig& cluster, std::uint32_t id, const std::string& job_toml,
               Time deadline);
  // Removes the job everywhere it is; returns what could not be reached (empty: all done).
  std::vector<std::string> uninstall(const control::ClusterConfig& cluster, std::uint32_t id,
                                     Time deadline);
  static std::vector<Daemon> all_daemons(const control::ClusterConfig& fabric);

  // One daemon at a time, for reconciling after a restart. install_on returns the daemon's
  // error ("" when installed); listed its jobs (nullopt: no answer).
  std::string install_on(const Daemon& daemon, std::uint32_t id, const std::string& job_toml,
                         Time deadline);
  bool remove_from(const Daemon& daemon, std::uint32_t id, Time deadline);
  std::optional<std::vector<std::uint32_t>> listed(const Daemon& daemon, Time deadline);
  // Tells each PS of job `id` to plan the job's seqs on `home` (a lent home, or its own back);
  // returns whether every one took it. A PS named in `unanswered` is not asked (it failed
  // earlier in the caller's round); one that fails now is added to it.
  bool set_home(const control::ClusterConfig& cluster, std::uint32_t id, const control::Slice& home,
                Time deadline, std::set<std::string>& unanswered);
  // Each daemon's counters for the job: {"name": {...} or {"error": ...}}.
  nlohmann::json stats(const control::ClusterConfig& cluster, std::uint32_t id, Time deadline);

 private:
  nlohmann::json ask(const Daemon& daemon, nlohmann::json request, Time deadline) const;

  std::string secret_;
};

}  // namespace atp::controller
