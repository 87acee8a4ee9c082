#pragma once
// The switch's counters, each listed once (engines/counters.h); docs/engines.md §2.9.
#include "engines/counters.h"

// Per job. X(name, meaning)
#define ATP_SWITCH_JOB_COUNTERS(X)                                                          \
  X(aggregated, "contributions added into an aggregator (claims included)")                 \
  X(completed, "sums that reached the fan-in and went upward")                              \
  X(collisions, "fragments that found another owner, another size, or no static slot")      \
  X(flushes, "partial sums flushed upward by a resend")                                     \
  X(forwarded_up, "packets sent upward without completing here (bypass, collision, flush)") \
  X(results_sent, "results and float requests multicast, run answers sent")                 \
  X(duplicates, "contributions already counted (dropped, or the sum sent again)")           \
  X(expired, "aggregators taken over because their claim was stale_after old (orphans)")   \
  X(fan_in_mismatch, "packets whose header fan-in differs from the installed one")          \
  X(forged, "packets with a wrong token, or from a port that may not speak for the job")

// Per switch.
#define ATP_SWITCH_COUNTERS(X)                                                              \
  X(packets, "packets into the pipeline")                                                   \
  X(malformed, "packets that fail decoding, or name no route")                              \
  X(unknown_job, "packets of a job the switch does not hold")                               \
  X(ecn_marked, "packet copies marked congested at egress")

namespace atp::engines {
ATP_COUNTER_STRUCT(SwitchJobCounters, ATP_SWITCH_JOB_COUNTERS);
ATP_COUNTER_STRUCT(SwitchCounters, ATP_SWITCH_COUNTERS);
}  // namespace atp::engines
