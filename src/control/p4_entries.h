#pragma once
// What the P4 programs' control plane installs, derived from the same SwitchConfig and
// SwitchJob entries the software switch takes (docs/p4.md, "Control plane"). The entries are
// built once, target-neutral (P4Entries), and rendered for a target:
//  - BMv2: simple_switch_CLI commands for p4/v1model/atp.p4;
//  - Tofino: a bfrt_python script for p4/tna/atp.p4 (names as bf-p4c writes them to bfrt.json,
//    checked by p4/tna/check_bfrt_names.py).
// The P4 programs need a power-of-two pool and static slices; the functions throw
// std::invalid_argument naming what does not fit.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/cluster_config.h"
#include "engines/switch/switch_tables.h"

namespace atp::control {

// What a program was compiled for (ATP_POOL in its atp.p4, ATP_LANES in its lanes.p4).
struct P4Limits {
  std::uint32_t pool = 4096;         // ATP_POOL
  std::uint32_t values = 256;        // ATP_LANES: values per packet, all passes
  std::uint32_t ports = 512;         // 9-bit port numbers
  // The port packets go round through for another pass (docs/p4.md, "Passes"): no host or switch
  // may sit behind it. Port p is one when (p & recirculation_mask) == recirculation_port.
  std::uint32_t recirculation_port = 509, recirculation_mask = 0x1FF;
  // Loopback ports the program can go round through besides the recirculation port
  // (ATP_LOOPBACK_PORTS: its parsers' value sets); 0: none, the target has no such ports. A
  // loopback port's number within its pipe is below `front_panel_in_pipe` (Tofino 1: 0-63
  // are the front-panel ports' channels, 64-71 internal ones such as the CPU's and port 68).
  std::uint32_t loopback_ports = 0, front_panel_in_pipe = 0;
  static P4Limits bmv2() { return {}; }
  // Four passes (p4/tna/lanes.p4); port 68 of each pipe is its recirculation port, and up to
  // 64 front-panel ports in loopback mode share the passes (p4/tna/atp.p4, round_ports).
  static P4Limits tofino() { return {8192, 73, 512, 68, 0x7F, 64, 64}; }
};

// Each pipe's aggregators are spread over its ports for passes by the low bits of their index
// (p4/tna/atp.p4, round_ports: key `bucket`, meta.index[6:0]), so a port's share of a pipe's
// passes is at most 1/128 above an even one.
inline constexpr std::uint32_t kRoundBuckets = 128;

// A key field or action parameter. Names are the P4 program's (bfrt.json's key names).
struct P4Value {
  enum class Format { number, mac, ipv4 };
  std::string name;
  std::uint64_t value = 0;
  Format format = Format::number;
  enum class Match { exact, ternary, lpm } match = Match::exact;
  std::uint64_t mask = 0;  // ternary
  int prefix = 0;          // lpm
};

struct P4TableEntry {
  std::string table;   // control path, e.g. AtpIngress.job_table.jobs
  std::string action;  // control path, e.g. AtpIngress.job_table.set_job; empty: a parser value set
  std::vector<P4Value> keys, params;
  bool is_default = false;  // the table's default action rather than an entry
  int priority = 0;         // tables with a ternary key (lower wins on BMv2 and Tofino)
};

struct P4MulticastGroup {
  std::uint16_t group = 0;
  std::vector<engines::Port> ports;
  // Each port's member slot: the index of register AtpIngress.heard the data plane sets when
  // the job's packet from that port passes the checks (what a control plane learning members
  // reads).
  std::vector<std::uint32_t> slots;
};

// The members table holds at most this many entries, and register AtpIngress.heard as many slots.
inline constexpr std::uint32_t kP4MemberSlots = 16384;

struct P4Entries {
  std::vector<P4TableEntry> tables;
  std::vector<P4MulticastGroup> groups;
  // From the profile: the claim clock's period is half of it (the control plane writes the
  // epoch register AtpIngress.claim_epoch; 0 = no profile here).
  Duration stale_after = 0;
  void append(P4Entries more);
};

// The profile: level, pool mask, K, policy. (stale_after is the control plane's: it writes the
// claim epoch, register AtpIngress.claim_epoch, every stale_after / 2.)
P4Entries p4_profile(const engines::SwitchConfig& config, const P4Limits& limits = {});
// One job's table entries and multicast group, its ports as they are in `job`; its member
// slots from `first_slot` on, one per port below (p4_member_slots of them; slot 0 is the hops
// up's, which nothing reads).
P4Entries p4_job(const engines::SwitchJob& job, const P4Limits& limits = {},
                 std::uint32_t first_slot = 1);
std::uint32_t p4_member_slots(const engines::SwitchJob& job);
// Everything switch `name` of `cluster` needs on a real network: the profile, each job's
// entries with node ids replaced by the ports of the switch's `ports` wiring, the next-hop
// addresses (p4/common/next_hop.p4) and plain IPv4 routes to the neighbours. With `only_job`,
// that job's entries alone (what admitting it at run time adds, or removing it deletes).
// Throws std::invalid_argument when the switch cannot be a P4 switch (no wiring, a node behind
// no port, its address not on ATP's UDP port, several threads).
P4Entries p4_switch(const ClusterConfig& cluster, const std::string& name,
                    const P4Limits& limits = {});
P4Entries p4_switch_job(const ClusterConfig& cluster, const std::string& name,
                        std::uint32_t job, const P4Limits& limits = {});
// What a switch needs before any job: the profile, the plain IPv4 routes to its neighbours and,
// on a Tofino with loopback ports, the ports its packets go round through.
P4Entries p4_switch_base(const ClusterConfig& cluster, const std::string& name,
                         const P4Limits& limits = {});
// One job's entries on switch `spec` (p4_switch_job's, from a SwitchJob the caller derived and
// may have changed, e.g. a static slice a running switch placed), node ids read from `book`.
P4Entries p4_job_on_switch(engines::SwitchJob job, const SwitchSpec& spec,
                           const runtime::AddressBook& book, const P4Limits& limits = {},
                           std::uint32_t first_slot = 1);
// The switch `name` of `cluster` as a P4 switch: its spec, checked (see p4_switch).
const SwitchSpec& p4_switch_spec(const ClusterConfig& cluster, const std::string& name);

// One table entry as a simple_switch_CLI command (table_add or table_set_default).
std::string bmv2_command(const P4TableEntry& entry);
// simple_switch_CLI commands. A group's node is created and associated in the same order as
// the groups, numbered from `first_node` (BMv2 numbers nodes 0, 1, ... on a fresh switch).
std::vector<std::string> bmv2_commands(const P4Entries& entries, unsigned first_node = 0);
// A bfrt_python script (run with `bfshell -b FILE` on the switch) that adds the entries, or
// deletes them with `remove`; program `program` (bfrt.<program>.pipe). Each multicast group
// starts with no port; with groups, the script also defines learn_members_forever() over
// them, and with a profile claim_clock_forever(): the long-lived bfrt_python sessions that add
// heard members to their groups and tick the claim clock.
std::string bfrt_python_script(const P4Entries& entries, const std::string& program = "atp",
                               bool remove = false);

// Member learning on a Tofino (src/control/bfrt_member_learner.cpp): the groups' members as
// learn_members_forever() reads them, {"GROUP": {"admission": N, "members": [[SLOT, PORT],
// ...]}} (a group admitted again under a new N is learned afresh), and the definition of
// learn_members_forever() with these as its default ATP_MEMBERS.
nlohmann::json bfrt_members(const std::vector<P4MulticastGroup>& groups,
                            std::uint64_t admission = 0);
std::string bfrt_member_learner(const nlohmann::json& members);
// atp_heartbeat(path, what, who), which both long-lived loops call: defined before them.
std::string bfrt_heartbeat_helper();

}  // namespace atp::control
