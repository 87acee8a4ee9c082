#pragma once
// The ATP switch pipeline (level 1 = a rack's ToR, level 2 = the PS rack's switch).
//
// One packet in, at most one verdict out, as on a programmable switch: the packet is rewritten
// in place and then dropped, sent to one port, or multicast to the job's members below.
// The stages, in order, mirror p4/: parse -> job table -> aggregator index -> owner check ->
// claim/join/flush/free -> write sum -> route. docs/engines.md lists every rule.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/common.h"
#include "engines/switch/aggregator_pool.h"
#include "proto/header.h"

namespace atp::engines {

enum class Policy : std::uint8_t {
  atp,              // dynamic: any job may claim any free aggregator (hashed index)
  static_partition, // each job owns a fixed slice of the pool (SwitchML-style)
  none,             // no in-network aggregation: everything goes to the PS
};

std::string to_string(Policy p);
bool parse_policy(const std::string& text, Policy& out);

struct SwitchConfig {
  proto::Level level = proto::Level::rack;
  std::uint32_t pool_size = 1024;
  std::uint16_t values_per_aggregator = 256;  // the largest K any job may use here
  Policy policy = Policy::atp;
};

// What the control plane installs per job.
struct SwitchJob {
  std::uint32_t job = 0;
  // Where results and float requests go: the job's workers in this rack in rank-in-rack order
  // (level 1) or the job's rack switches in rack order (level 2).
  std::vector<NodeId> downstream;
  // Next hop toward the PS: one entry for every ps_index, or a single entry for all.
  std::vector<NodeId> upstream;
  // The job's window (power of two): an aggregator held by seq s of this job is stale once the
  // job sends seq s + window, since that proves s finished at the PS.
  std::uint32_t window = 1;
  // Static policy only: the job's slice [first, first + count) of the pool.
  std::uint32_t static_first = 0;
  std::uint32_t static_count = 0;
  // Contributions a complete sum needs here: the job's workers in this rack (level 1) or its
  // racks (level 2). Packets whose header says otherwise are not aggregated, so a misconfigured
  // worker cannot complete a sum early, nor one sum mix headers of different shapes.
  std::uint8_t fan_in = 1;
  // Tenant isolation: packets of the job must carry this token, and come from a downstream
  // member (upward) or an upstream hop (downward).
  std::uint32_t token = 0;
};

struct SwitchJobCounters {
  std::uint64_t aggregated = 0;      // contributions added into an aggregator
  std::uint64_t completed = 0;       // sums that reached the fan-in and went upward
  std::uint64_t collisions = 0;      // fragments that found another owner (or no static slot)
  std::uint64_t flushes = 0;         // partial sums flushed by a resend
  std::uint64_t forwarded_to_ps = 0; // packets sent upward without completing here
  std::uint64_t results_sent = 0;    // results and float requests fanned out, run answers sent
  std::uint64_t duplicates = 0;      // contributions already counted (dropped or re-forwarded)
  std::uint64_t stale_reclaimed = 0; // aggregators taken back from an older seq of the job
  std::uint64_t fan_in_mismatch = 0; // header fan-in differs from the installed one
  std::uint64_t forged = 0;          // wrong token, or a sender that may not speak for the job
};

struct SwitchCounters {
  std::uint64_t malformed = 0;
  std::uint64_t unknown_job = 0;
  std::uint64_t packets = 0;
};

struct Forwarding {
  enum class Action : std::uint8_t { drop, unicast, multicast };
  Action action = Action::drop;
  NodeId to = 0;                    // unicast
  std::span<const NodeId> group;    // multicast: one copy of the packet each
};

class SwitchPipeline {
 public:
  explicit SwitchPipeline(SwitchConfig config);

  // Control plane. add_job replaces an existing entry of the same id; remove_job frees the
  // job's aggregators.
  void add_job(SwitchJob job);
  bool remove_job(std::uint32_t job);
  std::vector<std::uint32_t> jobs() const;

  // Data plane. `from` is the node the packet came from (kUnknownNode for a stranger;
  // nullopt when the caller vouches for it, as unit tests do). `congested` says the packet's
  // egress queue is above the ECN threshold. The switch keeps no timers, so it needs no clock.
  Forwarding process(std::span<std::uint8_t> packet, std::optional<NodeId> from = std::nullopt,
                     bool congested = false);

  const SwitchConfig& config() const { return config_; }
  const SwitchCounters& counters() const { return counters_; }
  const SwitchJobCounters* job_counters(std::uint32_t job) const;
  const AggregatorPool& pool() const { return pool_; }

 private:
  struct JobEntry {
    SwitchJob config;
    SwitchJobCounters counters;
  };
  struct Context;  // one packet's parse results, threaded through the stages

  Forwarding handle_downward(Context& c);
  Forwarding handle_fragment(Context& c);
  Forwarding handle_resend(Context& c);
  bool pick_aggregator(Context& c) const;
  bool aggregatable(const Context& c) const;
  bool fan_in_agrees(Context& c) const;
  static bool authentic(const SwitchJob& job, const proto::Header& h, std::optional<NodeId> from);
  Forwarding toward_asker(Context& c);
  Forwarding forward_up(Context& c);
  Forwarding route_up(Context& c);
  Forwarding emit_sum(Context& c, std::uint32_t racks, std::uint32_t workers);
  proto::Level level_after_me(const proto::Header& h) const;

  SwitchConfig config_;
  AggregatorPool pool_;
  std::unordered_map<std::uint32_t, JobEntry> jobs_;
  SwitchCounters counters_;
};

}  // namespace atp::engines
