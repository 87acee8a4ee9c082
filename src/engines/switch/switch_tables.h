#pragma once
// What the control plane installs in a switch: the switch's profile and one entry per job.
// On a Tofino these are the program's constants and its match-action table entries; here they
// are plain structs the pipeline reads, so both are configured from the same derivation.
#include <cstdint>
#include <string>
#include <vector>

#include "engines/common.h"
#include "proto/header.h"

namespace atp::engines {

// A switch port, as the data plane names it (a Tofino or BMv2 port number). The caller maps
// ports to whatever is attached: a UDP peer in the daemon, a simulated link in the simulator.
using Port = std::uint16_t;
// A multicast group id of the packet replication engine (0 = none, as on Tofino).
using MulticastGroupId = std::uint16_t;

// A software switch numbers its ports by the node ids of what is attached (its address book in
// the daemon, the simulator's node ids); a hardware target maps them in its own port table.
Port port_of_node(NodeId node);
NodeId node_of_port(Port port);
// Each job's results leave through its own replication group.
inline MulticastGroupId multicast_group_of_job(std::uint32_t job) {
  return static_cast<MulticastGroupId>(job + 1);
}

enum class Policy : std::uint8_t {
  atp,              // dynamic: any job may claim any free aggregator (hashed index)
  static_partition, // each job owns a fixed slice of the pool (SwitchML-style)
  none,             // no in-network aggregation: everything goes to the PS
};

std::string to_string(Policy p);
bool parse_policy(const std::string& text, Policy& out);

// Job ids a switch can hold: the owner tag keeps 15 bits of the job (engines.md §2.2).
inline constexpr std::uint32_t kMaxSwitchJobId = 0x7FFF;

// The passes a P4 switch takes a packet's values through (p4/common/constants.p4, docs/p4.md):
// the first pass decides and adds kFirstPassValues of them; a packet with more goes round again
// (recirculation) for kLaterPassValues more per pass. Every packet whose value stages run takes
// passes_for(value_count) passes, and a rack's complete sum released below a level 2 at least
// kReleasePasses (its last pass frees the aggregator: SwitchPipeline::aggregate); any other
// takes one.
inline constexpr std::uint32_t kFirstPassValues = 10;
inline constexpr std::uint32_t kLaterPassValues = 21;
inline constexpr std::uint8_t kReleasePasses = 2;
constexpr std::uint8_t passes_for(std::uint32_t value_count) {
  if (value_count <= kFirstPassValues) return 1;
  return static_cast<std::uint8_t>(1 + (value_count - kFirstPassValues + kLaterPassValues - 1) /
                                           kLaterPassValues);
}

struct SwitchConfig {
  proto::Level level = proto::Level::rack;
  std::uint32_t pool_size = 1024;
  // Values one pass through the pipeline adds (one register array each), and passes per
  // packet (recirculations + 1). A packet carries at most their product (K).
  std::uint16_t values_per_pass = 256;
  Policy policy = Policy::atp;
  std::uint8_t passes = 1;
  // An aggregator claimed this long ago is restarted by the next fragment that joins it, so
  // no state outlives the time a job takes to send 2^32 fragments (engines.md §2.2).
  Duration stale_after = 1 * kSecond;

  std::uint32_t values_per_packet() const { return std::uint32_t{values_per_pass} * passes; }
};

// One job's entry, as the job table holds it.
struct SwitchJob {
  std::uint32_t job = 0;
  // Ports toward the job's members below: its workers in this rack in rank-in-rack order
  // (level 1) or its rack switches in rack order (level 2). Results go to all of them through
  // `multicast_group`; a run-handshake answer goes to the one it names.
  std::vector<Port> downstream;
  // Ports toward the PS: one for every ps_index, or a single one for all.
  std::vector<Port> upstream;
  // The job's window (power of two). Checked on add_job and kept in traces, but no longer read
  // by the pipeline: an aggregator goes stale by its claim's age (engines.md §2.2), not by seq.
  std::uint32_t window = 1;
  // Static policy only: the job's slice [first, first + count) of the pool.
  std::uint32_t static_first = 0;
  std::uint32_t static_count = 0;
  // Contributions a complete sum needs here: the job's workers in this rack (level 1) or its
  // racks (level 2). Packets whose header says otherwise are not aggregated, so a misconfigured
  // worker cannot complete a sum early, nor one sum mix headers of different shapes.
  std::uint8_t fan_in = 1;
  // Tenant isolation: packets of the job must carry this token, and arrive on a downstream
  // port (upward) or an upstream port (downward).
  std::uint32_t token = 0;
  // The replication group that reaches `downstream`; the pipeline installs it with the job.
  MulticastGroupId multicast_group = 0;
};

}  // namespace atp::engines
