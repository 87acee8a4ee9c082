#include "control/p4_entries.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

#include "proto/header.h"

namespace atp::control {

namespace {

using Format = P4Value::Format;
using Match = P4Value::Match;

// An exact key field or an action parameter.
P4Value field(std::string name, std::uint64_t value, Format format = Format::number) {
  return {std::move(name), value, format};
}

P4Value ternary(std::string name, std::uint64_t value, std::uint64_t mask) {
  P4Value v{std::move(name), value};
  v.match = Match::ternary;
  v.mask = mask;
  return v;
}

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
      else if ((p & limits.recirculation_mask) == limits.recirculation_port)
        throw std::invalid_argument(fmt::format(
            "job {}: port {} is where the P4 program sends packets round for another pass, not "
            "a port to a host or switch",
            job.job, p));
}

// The ports below, each once, in slot order.
std::set<engines::Port> ports_below(const engines::SwitchJob& job) {
  return {job.downstream.begin(), job.downstream.end()};
}

// The job table's four tables (p4/common/job_table.p4) for one job.
std::vector<P4TableEntry> job_table_entries(const engines::SwitchJob& job, std::uint32_t first_slot) {
  const std::string jt = "AtpIngress.job_table.";
  std::vector<P4TableEntry> out;
  out.push_back({jt + "jobs", jt + "set_job", {field("hdr.atp.job", job.job)},
                 {field("token", job.token), field("fan_in", job.fan_in),
                  field("static_first", job.static_first), field("static_mask", static_mask(job)),
                  field("has_slice", job.static_count ? 1 : 0),
                  field("group", job.multicast_group)}});
  // Upward packets may come from the members below, downward ones from the hops up. A member
  // below speaks for itself alone: the key names the member an upward packet claims to be, its
  // index in the job's list (its rank in the rack at level 1, its rack at level 2), as
  // SwitchPipeline::parse_and_check binds it. It has its own slot of register `heard`; the hops
  // up share slot 0 (nothing reads it), and a downward packet claims no member (0).
  std::uint32_t slot = first_slot;
  for (int downward = 0; downward < 2; ++downward) {
    const auto& ports = downward ? job.upstream : job.downstream;
    for (engines::Port p : std::set<engines::Port>(ports.begin(), ports.end())) {
      const auto index = downward ? 0 : std::find(ports.begin(), ports.end(), p) - ports.begin();
      out.push_back({jt + "members", jt + "member",
                     {field("hdr.atp.job", job.job), field("ingress_port", p),
                      field("meta.downward", static_cast<std::uint64_t>(downward)),
                      field("meta.claimed_member", static_cast<std::uint64_t>(index))},
                     {field("slot", downward ? 0 : slot++)}});
    }
  }
  // One route per ps_index, or one matching every ps_index.
  const bool one_route = job.upstream.size() == 1;
  for (std::size_t i = 0; i < job.upstream.size(); ++i)
    out.push_back({jt + "routes_up", jt + "up",
                   {field("hdr.atp.job", job.job), ternary("hdr.atp.ps_index", one_route ? 0 : i,
                                                         one_route ? 0 : 0xff)},
                   {field("port", job.upstream[i])}, false, 1});
  for (std::size_t i = 0; i < job.downstream.size() && i < 32; ++i)
    out.push_back({jt + "answers", jt + "answer_to",
                   {field("hdr.atp.job", job.job), field("meta.answer_member", i)},
                   {field("port", job.downstream[i])}});
  return out;
}

}  // namespace

const SwitchSpec& p4_switch_spec(const ClusterConfig& cluster, const std::string& name) {
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

namespace {

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

const P4Port& wired(const SwitchSpec& spec, engines::Port port) {
  return *std::find_if(spec.p4.ports.begin(), spec.p4.ports.end(),
                       [&](const P4Port& p) { return p.port == port; });
}

std::vector<P4TableEntry> next_hops(const PortedJob& ported, const SwitchSpec& spec) {
  std::vector<P4TableEntry> out;
  for (const auto& [port, node] : ported.node_behind)
    out.push_back({"AtpEgress.next_hop.next_hop", "AtpEgress.next_hop.rewrite",
                   {field("hdr.atp.job", ported.job.job), field("egress_port", port)},
                   {field("src_mac", spec.p4.mac, Format::mac),
                    field("dst_mac", wired(spec, port).peer_mac, Format::mac),
                    field("src_ip", spec.address.ip, Format::ipv4),
                    field("dst_ip", node.ip, Format::ipv4), field("dst_port", node.port)}});
  return out;
}

P4Entries switch_jobs(const ClusterConfig& cluster, const std::string& name,
                      const std::uint32_t* only_job, const P4Limits& limits) {
  const SwitchSpec& spec = p4_switch_spec(cluster, name);
  runtime::AddressBook book;
  P4Entries out;
  bool found = false;
  std::uint32_t slot = 1;  // each job's members their own slots, in the file's order
  for (auto& job : cluster.switch_jobs(name, book)) {
    const std::uint32_t first = slot;
    slot += p4_member_slots(job);
    if (only_job && job.job != *only_job) continue;
    found = true;
    out.append(p4_job_on_switch(std::move(job), spec, book, limits, first));
  }
  if (only_job && !found)
    throw std::invalid_argument(fmt::format("switch '{}' does not serve job {}", name, *only_job));
  return out;
}

// ---- Rendering.

std::string value_text(const P4Value& v) {
  switch (v.format) {
    case Format::mac:
      return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", (v.value >> 40) & 0xff,
                         (v.value >> 32) & 0xff, (v.value >> 24) & 0xff, (v.value >> 16) & 0xff,
                         (v.value >> 8) & 0xff, v.value & 0xff);
    case Format::ipv4:
      return fmt::format("{}.{}.{}.{}", (v.value >> 24) & 0xff, (v.value >> 16) & 0xff,
                         (v.value >> 8) & 0xff, v.value & 0xff);
    case Format::number:
      break;
  }
  return std::to_string(v.value);
}

std::string bmv2_key(const P4Value& k) {
  switch (k.match) {
    case Match::ternary:
      return fmt::format("{}&&&{}", k.value, k.mask);
    case Match::lpm:
      return fmt::format("{}/{}", value_text(k), k.prefix);
    case Match::exact:
      break;
  }
  return value_text(k);
}

std::string bmv2_line(const P4TableEntry& e) {
  std::string line = e.is_default ? fmt::format("table_set_default {} {}", e.table, e.action)
                                  : fmt::format("table_add {} {}", e.table, e.action);
  for (const auto& k : e.keys) line += " " + bmv2_key(k);
  if (!e.is_default) line += " =>";
  for (const auto& p : e.params) line += " " + value_text(p);
  if (e.priority) line += fmt::format(" {}", e.priority);
  return line;
}

// bfrt_python names a field by its P4 name with dots as underscores.
std::string bfrt_name(const std::string& p4_name) {
  std::string s = p4_name;
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}

// Addresses as hexadecimal integers, which every bfrt_python version takes.
std::string bfrt_value(const P4Value& v) {
  if (v.format == Format::number) return std::to_string(v.value);
  return fmt::format("{:#x}", v.value);
}

// The action's name as bfrt_python's add_with_<action> spells it (the last path part).
std::string bfrt_action(const P4TableEntry& e) { return e.action.substr(e.action.rfind('.') + 1); }

std::string bfrt_line(const P4TableEntry& e, bool remove) {
  std::vector<std::string> args;
  for (const auto& k : e.keys) {
    args.push_back(bfrt_name(k.name) + "=" + bfrt_value(k));
    if (k.match == Match::ternary) args.push_back(fmt::format("{}_mask={:#x}", bfrt_name(k.name), k.mask));
    if (k.match == Match::lpm) args.push_back(fmt::format("{}_p_length={}", bfrt_name(k.name), k.prefix));
  }
  if (e.priority) args.push_back(fmt::format("MATCH_PRIORITY={}", e.priority));
  if (remove) {
    if (e.is_default) return fmt::format("p4.{}.reset_default()", e.table);
    return fmt::format("p4.{}.delete({})", e.table, fmt::join(args, ", "));
  }
  if (e.action.empty()) return fmt::format("p4.{}.add({})", e.table, fmt::join(args, ", "));  // a value set
  for (const auto& p : e.params) args.push_back(bfrt_name(p.name) + "=" + bfrt_value(p));
  return fmt::format("p4.{}.{}_with_{}({})", e.table, e.is_default ? "set_default" : "add",
                     bfrt_action(e), fmt::join(args, ", "));
}

// Loopback ports: the ingress parser takes what comes in on one as a later pass and the egress
// parser leaves what goes out on one unread (a value set each), and each pipe that has some
// spreads its aggregators over them and its recirculation port, in turn by the low bits of the
// index. One aggregator, one port: its packets' passes keep the order of their first passes,
// which is all the lanes need (docs/p4.md, "Passes").
std::vector<P4TableEntry> round_port_entries(const std::vector<std::uint16_t>& loopback,
                                             const P4Limits& limits) {
  if (loopback.empty()) return {};
  if (limits.loopback_ports == 0)
    throw std::invalid_argument(
        "loopback_ports: this target's program goes round through its recirculation port only "
        "(loopback ports are for Tofino)");
  if (loopback.size() > limits.loopback_ports)
    throw std::invalid_argument(fmt::format("loopback_ports: the P4 program takes at most {}, not {}",
                                            limits.loopback_ports, loopback.size()));
  const int pipe_shift = std::countr_one(limits.recirculation_mask);
  std::vector<P4TableEntry> out;
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_pipe;
  for (std::uint16_t p : loopback) {
    if (p >= limits.ports)
      throw std::invalid_argument(
          fmt::format("loopback port {} is beyond the target's {} ports", p, limits.ports));
    if ((p & limits.recirculation_mask) == limits.recirculation_port)
      throw std::invalid_argument(fmt::format(
          "loopback port {} is its pipe's recirculation port, which the program uses anyway", p));
    if ((p & limits.recirculation_mask) >= limits.front_panel_in_pipe)
      throw std::invalid_argument(fmt::format(
          "loopback port {} is an internal port of pipe {}, not a front-panel one (those are {} "
          "to {} in a pipe)",
          p, p >> pipe_shift, 0, limits.front_panel_in_pipe - 1));
    P4Value key = field("f1", p);
    key.match = Match::ternary;
    key.mask = limits.ports - 1;
    for (const char* parser : {"AtpIngressParser", "AtpEgressParser"})
      out.push_back({std::string(parser) + ".loopback_ports", "", {key}, {}});
    by_pipe[p >> pipe_shift].push_back(p);
  }
  for (auto& [pipe, ports] : by_pipe) {
    ports.insert(ports.begin(), (pipe << pipe_shift) | limits.recirculation_port);
    for (std::uint32_t bucket = 0; bucket < kRoundBuckets; ++bucket)
      out.push_back({"AtpIngress.round_ports", "AtpIngress.round_via",
                     {field("pipe", pipe), field("bucket", bucket)},
                     {field("port", ports[bucket % ports.size()])}});
  }
  return out;
}

}  // namespace

void P4Entries::append(P4Entries more) {
  for (auto& t : more.tables) tables.push_back(std::move(t));
  for (auto& g : more.groups) groups.push_back(std::move(g));
  if (more.stale_after) stale_after = more.stale_after;
}

P4Entries p4_profile(const engines::SwitchConfig& c, const P4Limits& limits) {
  check_profile(c, limits);
  P4Entries out;
  out.tables.push_back({"AtpIngress.profile", "AtpIngress.set_profile", {},
                        {field("level", static_cast<std::uint64_t>(c.level)),
                         field("pool_mask", c.pool_size == 0 ? 0 : c.pool_size - 1),
                         field("max_values", c.values_per_packet()),
                         field("policy", static_cast<std::uint64_t>(c.policy))},
                        true});
  out.stale_after = c.stale_after;
  return out;
}

std::uint32_t p4_member_slots(const engines::SwitchJob& job) {
  return static_cast<std::uint32_t>(ports_below(job).size());
}

P4Entries p4_job(const engines::SwitchJob& job, const P4Limits& limits, std::uint32_t first_slot) {
  check_ports(job, limits);
  const std::set<engines::Port> below = ports_below(job);  // in slot order, as the members table
  if (std::uint64_t{first_slot} + below.size() > kP4MemberSlots)
    throw std::invalid_argument(fmt::format("job {}: member slots {}..{} are beyond the {} the P4 "
                                            "programs hold", job.job, first_slot,
                                            first_slot + below.size(), kP4MemberSlots));
  P4Entries out;
  out.tables = job_table_entries(job, first_slot);
  P4MulticastGroup group{job.multicast_group, job.downstream, {}};
  for (engines::Port p : job.downstream)
    group.slots.push_back(first_slot + static_cast<std::uint32_t>(std::distance(below.begin(), below.find(p))));
  out.groups.push_back(std::move(group));
  return out;
}

P4Entries p4_switch_base(const ClusterConfig& cluster, const std::string& name,
                         const P4Limits& limits) {
  const SwitchSpec& spec = p4_switch_spec(cluster, name);
  P4Entries out = p4_profile(cluster.switch_config(name), limits);
  for (const P4Port& p : spec.p4.ports) {
    P4Value dst = field("hdr.ipv4.dst", p.peer_ip, Format::ipv4);
    dst.match = Match::lpm;
    dst.prefix = 32;
    out.tables.push_back({"AtpIngress.ipv4_routes", "AtpIngress.ipv4_forward", {dst},
                          {field("port", p.port), field("dst_mac", p.peer_mac, Format::mac)}});
  }
  for (auto& e : round_port_entries(spec.p4.loopback_ports, limits))
    out.tables.push_back(std::move(e));
  return out;
}

P4Entries p4_switch(const ClusterConfig& cluster, const std::string& name,
                    const P4Limits& limits) {
  P4Entries out = p4_switch_base(cluster, name, limits);
  out.append(switch_jobs(cluster, name, nullptr, limits));
  return out;
}

P4Entries p4_job_on_switch(engines::SwitchJob job, const SwitchSpec& spec,
                           const runtime::AddressBook& book, const P4Limits& limits,
                           std::uint32_t first_slot) {
  const PortedJob ported = to_ports(std::move(job), spec, book);
  P4Entries out = p4_job(ported.job, limits, first_slot);
  for (auto& e : next_hops(ported, spec)) out.tables.push_back(std::move(e));
  return out;
}

P4Entries p4_switch_job(const ClusterConfig& cluster, const std::string& name,
                        std::uint32_t job, const P4Limits& limits) {
  return switch_jobs(cluster, name, &job, limits);
}

std::string bmv2_command(const P4TableEntry& entry) { return bmv2_line(entry); }

std::vector<std::string> bmv2_commands(const P4Entries& entries, unsigned first_node) {
  std::vector<std::string> out;
  for (const auto& e : entries.tables) out.push_back(bmv2_line(e));
  unsigned node = first_node;
  for (const auto& g : entries.groups) {
    std::string ports;
    for (engines::Port p : g.ports) ports += fmt::format(" {}", p);
    out.push_back(fmt::format("mc_mgrp_create {}", g.group));
    out.push_back(fmt::format("mc_node_create {}{}", g.group, ports));
    out.push_back(fmt::format("mc_node_associate {} {}", g.group, node++));
  }
  return out;
}

std::string bfrt_python_script(const P4Entries& entries, const std::string& program,
                               bool remove) {
  std::string s = fmt::format(
      "# ATP switch entries for p4/tna/atp.p4, written by `atp p4 config --target tofino`.\n"
      "# Run on the switch: bfshell -b THIS_FILE (the program loaded as '{}').\n"
      "p4 = bfrt.{}.pipe\n",
      program, program);
  if (!remove) {
    // A member's heard slot may say heard from a job that held it before: cleared before any
    // entry can set it.
    for (const auto& g : entries.groups)
      for (std::uint32_t slot : g.slots)
        s += fmt::format("p4.AtpIngress.heard.mod(REGISTER_INDEX={}, f1=0)\n", slot);
    for (const auto& e : entries.tables) s += bfrt_line(e, false) + "\n";
  }
  // A group's node carries the group id as its node id and replication id. It starts with no
  // port: learn_members_forever() adds each member once heard.
  for (const auto& g : entries.groups) {
    if (remove) {
      s += fmt::format("bfrt.pre.mgid.delete(MGID={})\n", g.group);
      s += fmt::format("bfrt.pre.node.delete(MULTICAST_NODE_ID={})\n", g.group);
    } else {
      s += fmt::format(
          "bfrt.pre.node.add(MULTICAST_NODE_ID={0}, MULTICAST_RID={0}, MULTICAST_LAG_ID=[], "
          "DEV_PORT=[])\n",
          g.group);
      s += fmt::format(
          "bfrt.pre.mgid.add(MGID={0}, MULTICAST_NODE_ID=[{0}], "
          "MULTICAST_NODE_L1_XID_VALID=[False], MULTICAST_NODE_L1_XID=[0])\n",
          g.group);
    }
  }
  if (remove)
    for (const auto& e : entries.tables) s += bfrt_line(e, true) + "\n";
  const bool learner = !remove && !entries.groups.empty();
  const bool clock = !remove && entries.stale_after;
  if (learner || clock) s += bfrt_heartbeat_helper();
  if (learner) s += bfrt_member_learner(bfrt_members(entries.groups));
  if (clock)
    s += fmt::format(R"(
# The claim clock (engines::claim_clock): the epoch, from 2, every stale_after / 2. Without it
# no abandoned aggregator is ever taken over, and an orphan could be joined 2^32 fragments
# later (a wrong sum): run it in a long-lived bfrt_python session, and watch its heartbeat
# file, one line "UNIX_TIME epoch N ok|FAILED WHY failures COUNT" rewritten every tick. A line
# older than stale_after / 2, or one that says FAILED, is a clock that does not tick. A failed
# write is said on stderr, counted and tried again at the next tick; it never ends the loop.
def claim_clock_forever(stale_after_s={}, heartbeat="/run/atp-claim-clock", ticks=None):
    import sys, time
    start = time.monotonic()
    failures, tick = 0, 0
    while ticks is None or tick < ticks:
        tick += 1
        epoch = 2 + int((time.monotonic() - start) / (stale_after_s / 2))
        try:
            p4.AtpIngress.claim_epoch.mod(REGISTER_INDEX=0, f1=epoch)
            state = "ok"
        except Exception as e:
            failures += 1
            state = "FAILED " + " ".join(str(e).split())
            print(f"atp claim clock: epoch {{epoch}} not written ({{failures}} failures): {{e}}",
                  file=sys.stderr, flush=True)
        atp_heartbeat(heartbeat, f"epoch {{epoch}} {{state}} failures {{failures}}",
                      "atp claim clock")
        time.sleep(stale_after_s / 8)
)",
                     static_cast<double>(entries.stale_after) / kSecond);
  return s;
}

}  // namespace atp::control
