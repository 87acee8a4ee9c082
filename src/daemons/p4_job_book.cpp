#include "daemons/p4_job_book.h"

#include <stdexcept>

namespace atp::daemons {

P4JobBook::P4JobBook(const control::ClusterConfig& fabric, const std::string& name,
                     const control::P4Limits& limits)
    : fabric_(fabric), spec_(control::p4_switch_spec(fabric_, name)),
      profile_(fabric_.switch_config(name)), limits_(limits), slices_(profile_.pool_size),
      member_slots_(control::kP4MemberSlots - 1) {}

control::P4Entries P4JobBook::base() const {
  return control::p4_switch_base(fabric_, spec_.name, limits_);
}

std::vector<std::pair<std::uint32_t, control::P4Entries>> P4JobBook::file_jobs() {
  std::vector<std::pair<std::uint32_t, control::P4Entries>> jobs;
  runtime::AddressBook book;
  for (engines::SwitchJob& job : fabric_.switch_jobs(spec_.name, book)) {
    control::reserve_file_slice(slices_, profile_.policy, job);
    const std::uint32_t id = job.job;
    jobs.emplace_back(id, entries_of(std::move(job), book));
  }
  return jobs;
}

control::P4Entries P4JobBook::plan(const control::ClusterConfig& cluster, std::uint32_t job) {
  runtime::AddressBook book;
  std::optional<engines::SwitchJob> entry;
  for (engines::SwitchJob& j : cluster.switch_jobs(spec_.name, book))
    if (j.job == job) entry = std::move(j);
  if (!entry)
    throw std::invalid_argument("job " + std::to_string(job) + " does not use switch '" +
                                spec_.name + "'");
  const Held before = held(job);
  try {
    control::place_static_slice(slices_, profile_.policy, *entry, spec_.name);
    return entries_of(std::move(*entry), book);
  } catch (...) {
    restore(job, before);
    throw;
  }
}

void P4JobBook::restore(std::uint32_t job, const Held& held) {
  if (held.slice) slices_.reserve(job, *held.slice); else slices_.release(job);
  if (held.slots) member_slots_.reserve(job, *held.slots); else member_slots_.release(job);
}

void P4JobBook::release(std::uint32_t job) {
  slices_.release(job);
  member_slots_.release(job);
}

// The job's entries, with member slots of its own (the caller restores what the job held if
// this throws).
control::P4Entries P4JobBook::entries_of(engines::SwitchJob job, const runtime::AddressBook& book) {
  const std::uint32_t id = job.job;
  const auto slots = member_slots_.allocate(id, control::p4_member_slots(job));
  if (!slots)
    throw std::invalid_argument("switch '" + spec_.name + "': no " +
                                std::to_string(control::p4_member_slots(job)) +
                                " free member slots for job " + std::to_string(id) +
                                "; remove a job first");
  return control::p4_job_on_switch(std::move(job), spec_, book, limits_, slots->first + 1);
}

}  // namespace atp::daemons
