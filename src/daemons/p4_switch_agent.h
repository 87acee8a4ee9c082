#pragma once
// `atp p4 agent`: the control plane of one P4 switch (BMv2 today), beside it. It answers the
// same control requests as `atp switch` (control_requests.h), so the controller admits and
// removes jobs on a P4 switch as on a software one, and turns them into the program's entries
// (control/p4_entries.h) through the switch's runtime CLI:
//  - at start: the profile, the IPv4 routes and the cluster file's jobs, on a fresh switch (one
//    that has them already refuses them as duplicates: restart the switch with its agent;
//    BMv2's reset_state would also empty the program's const tables);
//  - admit: the job's table entries and multicast group, each handle the switch gives kept;
//    a command the switch refuses undoes what the admission added, and the error is returned;
//  - remove: exactly those handles deleted, the group destroyed; a delete the switch refuses is
//    kept and tried again every kLearnPeriod (the entry would block the job's next admission);
//  - members learned: a job's group starts with no port, and a port joins it once the data
//    plane has accepted the job's packet from it (register AtpIngress.heard, read every
//    kLearnPeriod for kQuickLearning after the member's admission, then after kSlowLearning,
//    each silent read doubling the wait up to kSlowestLearning: a member named but never there
//    costs a read every 8 s, not every second; once one member of a job is heard, its silent
//    members are read quickly again for kQuickLearning),
//    as `atp switch` sends results and float requests only to members it has heard from;
//  - the claim clock: the epoch register written every stale_after / 8 when it changes
//    (engines::claim_clock), as a Tofino's control CPU would.
// It runs on one event loop: the CLI is called from the loop's thread only.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/cluster_config.h"
#include "control/p4_entries.h"
#include "daemons/p4_job_book.h"
#include "runtime/event_loop.h"
#include "runtime/switch_cli.h"

namespace atp::daemons {

class P4SwitchAgent {
 public:
  // Programs the switch's base entries and the file's jobs; throws what the switch refused.
  P4SwitchAgent(const control::ClusterConfig& fabric, const std::string& name,
                std::unique_ptr<runtime::SwitchCli> cli,
                const control::P4Limits& limits = control::P4Limits::bmv2());
  P4SwitchAgent(const P4SwitchAgent&) = delete;
  P4SwitchAgent& operator=(const P4SwitchAgent&) = delete;

  static constexpr Duration kLearnPeriod = 20 * kMillisecond;
  static constexpr Duration kQuickLearning = 2 * kSecond;
  static constexpr Duration kSlowLearning = 1 * kSecond;
  static constexpr Duration kSlowestLearning = 8 * kSecond;

  // Ticks the claim clock and learns members on `loop` from now on.
  void attach(runtime::EventLoop& loop);
  // Writes the claim epoch of time `now` (since the agent started) if it changed.
  void tick(Time now);
  // Reads the heard slot of every member not heard yet whose read is due at `now`; a job with
  // newly heard members gets them in its multicast node. Returns whether some member is
  // still unheard.
  bool learn_members(Time now);
  // Tries the deletes the switch refused again; returns how many are still pending.
  std::size_t retry_deletes();

  nlohmann::json stats();
  const runtime::Endpoint& address() const { return book_.spec().address; }
  const std::string& name() const { return book_.spec().name; }
  const control::ClusterConfig& fabric() const { return book_.fabric(); }

  std::vector<std::uint32_t> job_ids() const;
  void admit(const control::ClusterConfig& cluster, std::uint32_t job);
  bool remove_job(std::uint32_t job);

 private:
  struct Member {
    engines::Port port = 0;
    std::uint32_t slot = 0;
    bool heard = false;
    Time admitted = 0, next_read = 0;
    Duration wait = 0;  // after kQuickLearning: the next silent read's wait (doubling)
  };
  // What one job holds on the switch: each table entry's (table, handle), its group's node and
  // the members below, heard or not.
  struct Installed {
    std::vector<std::pair<std::string, std::uint64_t>> entries;
    std::vector<std::pair<std::uint16_t, std::uint64_t>> groups;  // (group, node handle)
    std::vector<Member> members;
    bool node_stale = false;  // heard members the node does not have yet
  };
  void install(std::uint32_t job, const control::P4Entries& entries);
  void uninstall(const Installed& installed);
  void delete_or_keep(const std::string& command);
  void update_node(Installed& job);
  void quicken_silent_members(Installed& job, Time now);
  void add_group(const control::P4MulticastGroup& group, Installed& done);

  P4JobBook book_;
  std::unique_ptr<runtime::SwitchCli> cli_;
  std::map<std::uint32_t, Installed> jobs_;
  Time started_ = 0;
  int tick_timer_ = -1, learn_timer_ = -1;
  std::vector<std::string> pending_deletes_;
  std::uint32_t epoch_written_ = 0;  // 0: none yet
  std::uint64_t ticks_ = 0, tick_failures_ = 0;
  std::string last_tick_error_;
};

// The number after `marker` in a CLI answer ("... with handle 3"); throws SwitchCliError
// naming `command` if it is not there.
std::uint64_t number_after(const std::string& answer, const std::string& marker,
                           const std::string& command);

}  // namespace atp::daemons
