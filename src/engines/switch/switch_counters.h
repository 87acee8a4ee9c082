#pragma once
// The switch's counters. Each field is listed once, in the X-macros below; the simulator's
// sums, the daemon's JSON, Prometheus and the docs all walk these lists (for_each_field).
#include <cstdint>
#include <type_traits>

namespace atp::engines {

// Per job. X(name, meaning)
#define ATP_SWITCH_JOB_COUNTERS(X)                                                          \
  X(aggregated, "contributions added into an aggregator (claims included)")                 \
  X(completed, "sums that reached the fan-in and went upward")                              \
  X(collisions, "fragments that found another owner, another size, or no static slot")      \
  X(flushes, "partial sums flushed upward by a resend")                                     \
  X(forwarded_up, "packets sent upward without completing here (bypass, collision, flush)") \
  X(results_sent, "results and float requests multicast, run answers sent")                 \
  X(duplicates, "contributions already counted (dropped, or the sum sent again)")           \
  X(stale_reclaimed, "aggregators taken back from an older seq or another run of the job")  \
  X(expired, "aggregators restarted because their claim was older than stale_after")       \
  X(fan_in_mismatch, "packets whose header fan-in differs from the installed one")          \
  X(forged, "packets with a wrong token, or from a port that may not speak for the job")

// Per switch.
#define ATP_SWITCH_COUNTERS(X)                                                              \
  X(packets, "packets into the pipeline")                                                   \
  X(malformed, "packets that fail decoding, or name no route")                              \
  X(unknown_job, "packets of a job the switch does not hold")                               \
  X(ecn_marked, "packet copies marked congested at egress")

#define ATP_DECLARE_COUNTER(name, meaning) std::uint64_t name = 0;

struct SwitchJobCounters {
  ATP_SWITCH_JOB_COUNTERS(ATP_DECLARE_COUNTER)
};

struct SwitchCounters {
  ATP_SWITCH_COUNTERS(ATP_DECLARE_COUNTER)
};

#define ATP_VISIT_MEMBER(name, meaning) f(#name, meaning, &Counters::name);

// Calls f(name, meaning, pointer to member) for every counter of `Counters`, in order.
template <typename Counters, typename F>
void for_each_member(F&& f) {
  if constexpr (std::is_same_v<Counters, SwitchJobCounters>) {
    ATP_SWITCH_JOB_COUNTERS(ATP_VISIT_MEMBER)
  } else {
    static_assert(std::is_same_v<Counters, SwitchCounters>);
    ATP_SWITCH_COUNTERS(ATP_VISIT_MEMBER)
  }
}

// Calls f(name, value) for every counter of `c`.
template <typename Counters, typename F>
void for_each_field(const Counters& c, F&& f) {
  for_each_member<Counters>([&](const char* name, const char*, auto member) { f(name, c.*member); });
}

// a += b, field by field.
template <typename Counters>
void add_counters(Counters& a, const Counters& b) {
  for_each_member<Counters>([&](const char*, const char*, auto member) { a.*member += b.*member; });
}

}  // namespace atp::engines
