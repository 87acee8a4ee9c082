#pragma once
// The simulated cluster's control plane: it installs a job's switch entries when the job
// arrives and removes them when its last worker is done, so jobs come and go during a run as
// they do under `atp ctl`. Under the static policy each switch's slices come from a
// SliceAllocator, the one the switch daemon uses: a job arriving later gets aggregators no
// running job holds (where a departed job's were), or none (then the PS does its work).
// Under planned placement it lends the homes of absent jobs to present ones next to them and
// takes them back when their jobs arrive (control/home_lending.h), telling the jobs' PSs and
// workers (rehome).
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "control/slice_allocator.h"
#include "engines/home_slice.h"
#include "sim/nodes.h"

namespace atp::sim {

class ControlPlaneNode : public Node {
 public:
  // The switch entries job `job` needs (static slices are allocated at arrival, `static_count`
  // aggregators each), and how many workers must finish before it leaves.
  struct JobPlan {
    Time arrival = 0;
    std::vector<std::pair<SwitchNode*, engines::SwitchJob>> entries;
    std::size_t workers = 0;
    // The home admission gave it (planned placement on ATP switches), for lending, and its
    // window: the most of a lent home it could use.
    std::optional<engines::HomeSlice> home;
    std::uint32_t window = 0;
  };
  // Called with a present job's home whenever lending changes it.
  using Rehome = std::function<void(std::uint32_t job, const engines::HomeSlice& home)>;
  void on_rehome(Rehome rehome) { rehome_ = std::move(rehome); }
  void plan(std::uint32_t job, JobPlan plan) { jobs_[job].plan = std::move(plan); }
  void add_entry(std::uint32_t job, SwitchNode* sw, engines::SwitchJob entry) {
    jobs_.at(job).plan.entries.emplace_back(sw, std::move(entry));
  }

  void start(Simulator& sim, NodeId self);
  void timer(Simulator& sim) override;
  void receive(Simulator&, NodeId, std::span<std::uint8_t>) override {}
  // Called by each worker of the job as it finishes its last iteration.
  void worker_finished(std::uint32_t job);

  // The job's switch counters, summed: live while it runs, as they were when it left after.
  engines::SwitchJobCounters switch_counters(std::uint32_t job) const;
  // Where the job's static slice began at its first rack switch (nullopt: none).
  std::optional<std::uint32_t> static_first(std::uint32_t job) const;
  bool departed(std::uint32_t job) const { return jobs_.at(job).departed; }

 private:
  struct Job {
    JobPlan plan;
    bool arrived = false, departed = false;
    std::size_t finished = 0;
    engines::SwitchJobCounters counters_at_departure;
    std::optional<std::uint32_t> static_first;
    std::optional<engines::HomeSlice> home_now;  // as last lent (nullopt: its own)
  };
  void arrive(std::uint32_t id, Job& job);
  void depart(std::uint32_t id, Job& job);
  void lend_homes();

  std::map<std::uint32_t, Job> jobs_;
  std::map<SwitchNode*, control::SliceAllocator> slices_;
  Rehome rehome_;
  NodeId self_ = 0;
};

}  // namespace atp::sim
