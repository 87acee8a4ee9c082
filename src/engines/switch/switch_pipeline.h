#pragma once
// The ATP switch pipeline (level 1 = a rack's ToR, level 2 = the PS rack's switch), written as
// the P4 program's stages in order, so that it is the program's executable specification:
//
//   parse -> job table -> classify -> aggregator index -> owner_seq -> owner_id -> value_count
//         -> bitmap -> count -> ecn -> values (one array per pass) -> wrapped
//         -> next step (one decision from the metadata) -> rewrite + counters -> egress ECN
//
// Each register stage applies one action of AggregatorRegisters. docs/engines.md §2 walks the
// stages and gives the next-step table; p4/ mirrors them one control block each.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/common.h"
#include "engines/switch/aggregator_registers.h"
#include "engines/switch/switch_counters.h"
#include "engines/switch/switch_tables.h"
#include "proto/header.h"

namespace atp::engines {

// What the pipeline does with a packet: drop it, send it out of one port, or hand it to the
// replication engine for a multicast group (one copy per port of the group).
struct Verdict {
  enum class Action : std::uint8_t { drop, port, multicast };
  Action action = Action::drop;
  Port port = 0;                 // Action::port
  MulticastGroupId group = 0;    // Action::multicast
  std::uint8_t passes = 1;       // trips through a P4 switch's pipe (passes_for; a release more)
  bool operator==(const Verdict&) const = default;
};

std::string to_string(const Verdict& v);

// Every decision the next-step stage can take (SwitchML's next_step_selector).
enum class NextStep : std::uint8_t {
  drop_malformed,   // does not decode, or names a PS shard with no route
  drop_unknown_job,
  drop_forged,      // wrong token, or a port that may not speak for the job
  pass_up,          // not ours to aggregate: forwarded up unchanged but for next_level
  collide_up,       // another owner or size, or no static slot: forwarded up marked collision
  absorb,           // a contribution added; the sum is not complete
  drop_duplicate,   // a contribution already counted, sum not complete
  emit_sum,         // complete (or a duplicate of a complete one): the sum goes up
  flush_up,         // a resend flushed the aggregator's partial sum up
  multicast_down,   // a result or float request, to the job's members
  join_up,          // a run-handshake join, up toward PS 0
  answer_down,      // a run-handshake answer or a late copy, to the one member it names
};

// The claim clock at `now`: epochs of stale_after / 2, from 2, so a claim two epochs old is
// between stale_after / 2 and stale_after old. A P4 switch gets it from its control plane.
ClaimClock claim_clock(Time now, Duration stale_after);

class SwitchPipeline {
 public:
  explicit SwitchPipeline(SwitchConfig config);

  // Control plane. add_job replaces an existing entry of the same id and installs its
  // multicast group; remove_job frees the job's aggregators and its group.
  void add_job(SwitchJob job);
  bool remove_job(std::uint32_t job);
  std::vector<std::uint32_t> jobs() const;
  const SwitchJob* job(std::uint32_t job) const;  // the installed entry, or null
  // The replication engine's table: the ports a group reaches (empty if none).
  std::span<const Port> multicast_ports(MulticastGroupId group) const;
  // Which of those members proved, for the group's job, that they hold their address: an
  // upward packet of the job with its token, naming the member's own rank (level 1) or rack
  // (level 2), came from it (as P4's `heard` register). A daemon multicasts to these alone, so
  // a job naming another tenant's addresses reflects nothing at them (issue 49 item 1).
  // Null for a group no job holds; in multicast_ports order.
  const std::vector<bool>* heard_members(MulticastGroupId group) const;

  // Data plane, ingress: one packet from `ingress_port` at `now` (the caller's clock; only
  // the aggregator's claim time uses it). Rewrites the packet in place and decides.
  Verdict ingress(std::span<std::uint8_t> packet, Port ingress_port, Time now);
  // Data plane, egress: one copy leaving through a port whose queue is above the ECN
  // threshold (`congested`) gets the ecn flag. Run-handshake packets are never marked.
  void egress(std::span<std::uint8_t> packet, bool congested);
  // Both, for callers whose every copy sees the same queue (tests, traces).
  Verdict process(std::span<std::uint8_t> packet, Port ingress_port, Time now,
                  bool congested = false);

  const SwitchConfig& config() const { return config_; }
  const SwitchCounters& counters() const { return counters_; }
  const SwitchJobCounters* job_counters(std::uint32_t job) const;
  const AggregatorRegisters& registers() const { return registers_; }

 private:
  struct JobEntry {
    SwitchJob config;
    SwitchJobCounters counters;
    std::vector<bool> heard;  // per downstream member (heard_members)
  };
  struct Metadata;  // one packet's parse results and stage outputs, as P4 metadata
  enum class PacketClass : std::uint8_t;

  std::optional<NextStep> parse_and_check(Metadata& m, Port ingress_port);
  PacketClass classify(Metadata& m) const;
  NextStep decide(Metadata& m, Port ingress_port, Time now);
  bool aggregator_index(Metadata& m) const;
  NextStep aggregate(Metadata& m, Time now);
  NextStep flush(Metadata& m);
  void free_on_result(Metadata& m);
  bool owner_match_and_free(Metadata& m);
  bool values_stages(Metadata& m, Update u, bool into_packet);
  Verdict apply(NextStep step, Metadata& m);
  void count(NextStep step, const Metadata& m);
  proto::Level level_after_me(const proto::Header& h) const;

  SwitchConfig config_;
  AggregatorRegisters registers_;
  std::unordered_map<std::uint32_t, JobEntry> jobs_;
  std::unordered_map<MulticastGroupId, std::vector<Port>> groups_;
  std::unordered_map<MulticastGroupId, std::uint32_t> group_jobs_;
  SwitchCounters counters_;
};

}  // namespace atp::engines
