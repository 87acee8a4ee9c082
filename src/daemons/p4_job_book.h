#pragma once
// What a P4 switch's agent gives each job, whatever the target (BMv2 or Tofino): its static
// slice of the pool and its member slots (register heard), and from them the job's entries
// (control::p4_job_on_switch). An admission is planned before the switch is touched: a plan
// that is refused leaves what the job held as it was.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/cluster_config.h"
#include "control/p4_entries.h"
#include "control/slice_allocator.h"

namespace atp::daemons {

class P4JobBook {
 public:
  // Throws std::invalid_argument when switch `name` of `fabric` cannot be a P4 switch.
  P4JobBook(const control::ClusterConfig& fabric, const std::string& name,
            const control::P4Limits& limits);
  P4JobBook(const P4JobBook&) = delete;  // spec_ refers into fabric_
  P4JobBook& operator=(const P4JobBook&) = delete;

  // What the switch needs before any job: the profile and the IPv4 routes.
  control::P4Entries base() const;
  // The cluster file's jobs on this switch and their entries, slices as the file cut them.
  std::vector<std::pair<std::uint32_t, control::P4Entries>> file_jobs();
  // Job `job` of `cluster` on this switch: its slice and member slots taken (a job already
  // here gets new ones), its entries returned. Throws std::invalid_argument, the job holding
  // what it held before, when the job does not use this switch or does not fit.
  control::P4Entries plan(const control::ClusterConfig& cluster, std::uint32_t job);
  void release(std::uint32_t job);

  std::optional<control::Slice> slice_of(std::uint32_t job) const { return slices_.slice_of(job); }
  const control::ClusterConfig& fabric() const { return fabric_; }
  const control::SwitchSpec& spec() const { return spec_; }
  const engines::SwitchConfig& profile() const { return profile_; }

 private:
  // What a job holds, given back when its plan is refused.
  struct Held {
    std::optional<control::Slice> slice, slots;
  };
  Held held(std::uint32_t job) const { return {slices_.slice_of(job), member_slots_.slice_of(job)}; }
  void restore(std::uint32_t job, const Held& held);
  control::P4Entries entries_of(engines::SwitchJob job, const runtime::AddressBook& book);

  control::ClusterConfig fabric_;
  const control::SwitchSpec& spec_;
  engines::SwitchConfig profile_;
  control::P4Limits limits_;
  control::SliceAllocator slices_;
  control::SliceAllocator member_slots_;  // slot s + 1 of register heard (0 is the hops up's)
};

}  // namespace atp::daemons
