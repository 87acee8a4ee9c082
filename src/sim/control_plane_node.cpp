#include "sim/control_plane_node.h"

#include "control/home_lending.h"

namespace atp::sim {

void ControlPlaneNode::start(Simulator& sim, NodeId self) {
  self_ = self;
  timer(sim);
}

// Installs every job whose time has come, then waits for the next arrival.
void ControlPlaneNode::timer(Simulator& sim) {
  std::optional<Time> next;
  bool arrivals = false;
  for (auto& [id, job] : jobs_) {
    if (job.arrived) continue;
    if (job.plan.arrival <= sim.now()) {
      arrive(id, job);
      arrivals = true;
    } else if (!next || job.plan.arrival < *next) {
      next = job.plan.arrival;
    }
  }
  if (arrivals) lend_homes();
  if (next) sim.arm_timer(self_, *next);
}

void ControlPlaneNode::arrive(std::uint32_t id, Job& job) {
  job.arrived = true;
  for (auto& [sw, entry] : job.plan.entries) {
    engines::SwitchJob installed = entry;
    if (sw->pipeline().config().policy == engines::Policy::static_partition) {
      auto [it, fresh] = slices_.try_emplace(sw, sw->pipeline().config().pool_size);
      const auto slice = it->second.allocate(id, entry.static_count);
      installed.static_first = slice ? slice->first : 0;
      installed.static_count = slice ? slice->count : 0;
      if (!job.static_first && slice && slice->count > 0) job.static_first = slice->first;
    }
    sw->add_job(installed);
  }
}

void ControlPlaneNode::worker_finished(std::uint32_t id) {
  Job& job = jobs_.at(id);
  if (++job.finished == job.plan.workers) depart(id, job);
}

void ControlPlaneNode::depart(std::uint32_t id, Job& job) {
  job.counters_at_departure = switch_counters(id);
  job.departed = true;
  for (auto& [sw, entry] : job.plan.entries) {
    sw->remove_job(id);
    if (auto it = slices_.find(sw); it != slices_.end()) it->second.release(id);
  }
  lend_homes();
}

// Each present job's home, grown over the absent homes next to it; a job told only when its
// home changes.
void ControlPlaneNode::lend_homes() {
  if (!rehome_) return;
  std::vector<std::uint32_t> ids;
  std::vector<control::Slice> homes;
  std::vector<bool> present;
  std::vector<std::uint32_t> wants;
  for (const auto& [id, job] : jobs_)
    if (job.plan.home) {
      ids.push_back(id);
      homes.push_back({job.plan.home->first, job.plan.home->count});
      present.push_back(job.arrived && !job.departed);
      wants.push_back(job.plan.window);
    }
  const std::vector<control::Slice> now = control::lend_idle_homes(homes, present, wants);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    Job& job = jobs_.at(ids[i]);
    if (!present[i]) continue;
    engines::HomeSlice home = *job.plan.home;
    home.first = now[i].first;
    home.count = now[i].count;
    const engines::HomeSlice before = job.home_now.value_or(*job.plan.home);
    if (home.first == before.first && home.count == before.count) continue;
    job.home_now = home;
    rehome_(ids[i], home);
  }
}

engines::SwitchJobCounters ControlPlaneNode::switch_counters(std::uint32_t id) const {
  const Job& job = jobs_.at(id);
  if (job.departed) return job.counters_at_departure;
  engines::SwitchJobCounters sum;
  for (const auto& [sw, entry] : job.plan.entries)
    if (const auto* c = sw->pipeline().job_counters(id)) engines::add_counters(sum, *c);
  return sum;
}

std::optional<std::uint32_t> ControlPlaneNode::static_first(std::uint32_t id) const {
  return jobs_.at(id).static_first;
}

}  // namespace atp::sim
