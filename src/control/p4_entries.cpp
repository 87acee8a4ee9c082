#include "control/p4_entries.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <set>
#include <stdexcept>

namespace atp::control {

namespace {

constexpr const char* kJobs = "AtpIngress.job_table.jobs";
constexpr const char* kMembers = "AtpIngress.job_table.members";
constexpr const char* kRoutes = "AtpIngress.job_table.routes_up";
constexpr const char* kAnswers = "AtpIngress.job_table.answers";

void check_profile(const engines::SwitchConfig& c, const P4Limits& limits) {
  if (c.policy != engines::Policy::none &&
      (!std::has_single_bit(c.pool_size) || c.pool_size > limits.pool))
    throw std::invalid_argument(fmt::format(
        "the P4 programs need a power-of-two pool of at most {} aggregators, not {}", limits.pool,
        c.pool_size));
  if (c.values_per_packet() > limits.values)
    throw std::invalid_argument(fmt::format("the P4 program aggregates at most {} values, not {}",
                                            limits.values, c.values_per_packet()));
}

std::uint32_t static_mask(const engines::SwitchJob& job) {
  if (job.static_count != 0 && !std::has_single_bit(job.static_count))
    throw std::invalid_argument(fmt::format(
        "job {}: the P4 programs need a power-of-two static slice, not {}", job.job,
        job.static_count));
  return job.static_count == 0 ? 0 : job.static_count - 1;
}

void check_ports(const engines::SwitchJob& job, const P4Limits& limits) {
  for (const auto* list : {&job.downstream, &job.upstream})
    for (engines::Port p : *list)
      if (p >= limits.ports)
        throw std::invalid_argument(
            fmt::format("job {}: port {} is beyond the target's {} ports", job.job, p, limits.ports));
}

}  // namespace

std::vector<std::string> bmv2_profile(const engines::SwitchConfig& c, const P4Limits& limits) {
  check_profile(c, limits);
  return {fmt::format("table_set_default AtpIngress.profile AtpIngress.set_profile {} {} {} {}",
                      static_cast<int>(c.level), c.pool_size == 0 ? 0 : c.pool_size - 1,
                      c.values_per_packet(), static_cast<int>(c.policy))};
}

std::vector<std::string> bmv2_job(const engines::SwitchJob& job, unsigned node_handle,
                                  const P4Limits& limits) {
  check_ports(job, limits);
  std::vector<std::string> out;
  out.push_back(fmt::format("table_add {} AtpIngress.job_table.set_job {} => {} {} {} {} {} {}",
                            kJobs, job.job, job.token, job.fan_in, job.static_first,
                            static_mask(job), job.static_count ? 1 : 0, job.multicast_group));
  // Upward packets may come from the members below, downward ones from the hops up.
  for (int downward = 0; downward < 2; ++downward) {
    const auto& ports = downward ? job.upstream : job.downstream;
    for (engines::Port p : std::set<engines::Port>(ports.begin(), ports.end()))
      out.push_back(fmt::format("table_add {} AtpIngress.job_table.member {} {} {} =>", kMembers,
                                job.job, p, downward));
  }
  if (job.upstream.size() == 1) {
    out.push_back(fmt::format("table_add {} AtpIngress.job_table.up {} 0&&&0 => {} 1", kRoutes,
                              job.job, job.upstream[0]));
  } else {
    for (std::size_t i = 0; i < job.upstream.size(); ++i)
      out.push_back(fmt::format("table_add {} AtpIngress.job_table.up {} {}&&&0xff => {} 1",
                                kRoutes, job.job, i, job.upstream[i]));
  }
  for (std::size_t i = 0; i < job.downstream.size() && i < 32; ++i)
    out.push_back(fmt::format("table_add {} AtpIngress.job_table.answer_to {} {} => {}", kAnswers,
                              job.job, i, job.downstream[i]));
  std::string ports;
  for (engines::Port p : job.downstream) ports += fmt::format(" {}", p);
  out.push_back(fmt::format("mc_mgrp_create {}", job.multicast_group));
  out.push_back(fmt::format("mc_node_create {}{}", job.multicast_group, ports));
  out.push_back(fmt::format("mc_node_associate {} {}", job.multicast_group, node_handle));
  return out;
}

}  // namespace atp::control
