#include "control/p4_entries.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <stdexcept>

#include "proto/header.h"

namespace atp::control {

namespace {

constexpr const char* kJobs = "AtpIngress.job_table.jobs";
constexpr const char* kMembers = "AtpIngress.job_table.members";
constexpr const char* kRoutes = "AtpIngress.job_table.routes_up";
constexpr const char* kAnswers = "AtpIngress.job_table.answers";
constexpr const char* kNextHop = "AtpEgress.next_hop.next_hop";
constexpr const char* kRoutes4 = "AtpIngress.ipv4_routes";

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

std::string mac_text(std::uint64_t mac) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", (mac >> 40) & 0xff,
                     (mac >> 32) & 0xff, (mac >> 24) & 0xff, (mac >> 16) & 0xff, (mac >> 8) & 0xff,
                     mac & 0xff);
}

std::string ip_text(std::uint32_t ip) {
  return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff);
}

const SwitchSpec& p4_switch(const ClusterConfig& cluster, const std::string& name) {
  const SwitchSpec& spec = cluster.switch_named(name);
  const std::string where = "switch '" + name + "'";
  if (spec.p4.empty())
    throw std::invalid_argument(where + ": a P4 switch needs `mac` and `ports` in the cluster file "
                                        "(what each port leads to)");
  if (spec.address.port != proto::kDefaultUdpPort)
    throw std::invalid_argument(fmt::format(
        "{}: a P4 switch parses ATP on UDP port {}; its address has port {}", where,
        proto::kDefaultUdpPort, spec.address.port));
  if (spec.threads != 1) throw std::invalid_argument(where + ": a P4 switch has one thread");
  return spec;
}

// The job's node ids (from the address book) as the switch's ports, and the node behind each
// port, checked to be one per (job, port): the next hop's key.
struct PortedJob {
  engines::SwitchJob job;
  std::map<engines::Port, runtime::Endpoint> node_behind;
};

PortedJob to_ports(engines::SwitchJob job, const SwitchSpec& spec,
                   const runtime::AddressBook& book) {
  PortedJob out;
  auto port_of = [&](engines::Port node) {
    const runtime::Endpoint& e = book.endpoint(node);
    for (const P4Port& p : spec.p4.ports)
      if (p.peer_ip == e.ip) {
        const auto [it, fresh] = out.node_behind.emplace(p.port, e);
        if (!fresh && !(it->second == e))
          throw std::invalid_argument(fmt::format(
              "switch '{}': job {} has two nodes behind port {} ({} and {}); a P4 switch "
              "addresses one node per job and port", spec.name, job.job, p.port,
              it->second.str(), e.str()));
        return engines::Port{p.port};
      }
    throw std::invalid_argument(fmt::format(
        "switch '{}': no port in `ports` leads to {} (job {})", spec.name, e.str(), job.job));
  };
  for (auto* list : {&job.downstream, &job.upstream})
    for (engines::Port& p : *list) p = port_of(p);
  out.job = std::move(job);
  return out;
}

std::vector<std::string> next_hops(const PortedJob& ported, const SwitchSpec& spec) {
  std::vector<std::string> out;
  for (const auto& [port, node] : ported.node_behind) {
    const auto peer = std::find_if(spec.p4.ports.begin(), spec.p4.ports.end(),
                                   [&](const P4Port& p) { return p.port == port; });
    out.push_back(fmt::format("table_add {} AtpEgress.next_hop.rewrite {} {} => {} {} {} {} {}",
                              kNextHop, ported.job.job, port, mac_text(spec.p4.mac),
                              mac_text(peer->peer_mac), ip_text(spec.address.ip),
                              ip_text(node.ip), node.port));
  }
  return out;
}

}  // namespace

std::vector<std::string> bmv2_switch(const ClusterConfig& cluster, const std::string& name,
                                     const P4Limits& limits) {
  const SwitchSpec& spec = p4_switch(cluster, name);
  std::vector<std::string> out = bmv2_profile(cluster.switch_config(name), limits);
  runtime::AddressBook book;
  unsigned node_handle = 0;
  for (auto& job : cluster.switch_jobs(name, book)) {
    const PortedJob ported = to_ports(std::move(job), spec, book);
    for (auto& line : bmv2_job(ported.job, node_handle++, limits)) out.push_back(std::move(line));
    for (auto& line : next_hops(ported, spec)) out.push_back(std::move(line));
  }
  for (const P4Port& p : spec.p4.ports)
    out.push_back(fmt::format("table_add {} AtpIngress.ipv4_forward {}/32 => {} {}", kRoutes4,
                              ip_text(p.peer_ip), p.port, mac_text(p.peer_mac)));
  return out;
}

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
