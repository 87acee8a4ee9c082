#pragma once
// Builds a simulated cluster (racks of workers, one level-1 switch per rack, a level-2 switch
// in the PS rack, parameter servers), runs the jobs' training loops on it, and reports.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/cluster_config.h"
#include "engines/switch/switch_pipeline.h"
#include "engines/worker/worker.h"
#include "workload/gradients.h"
#include "sim/nodes.h"
#include "sim/simulator.h"

namespace atp::sim {

// A job arrives at plan.start (its switch entries are installed then) and leaves when its last
// worker finishes (they are removed, and a static slice goes back to the pool).
struct JobSpec {
  // Workers of the job in each cluster rack (0: none there). At most 32 per rack.
  std::vector<std::uint8_t> workers_per_rack;
  std::uint32_t window = 64;
  std::uint32_t ring = 0;  // 0: ring_or_default
  bool aggregator_window = false;  // the workers' collision-driven second window
  bool borrow_aggregators = false;  // the PSs plan on other jobs' idle home aggregators too
  engines::Placement placement = engines::Placement::planned;
  bool congestion_control = true;  // false: the workers' windows stay at their ceiling
  // ring: the workers allreduce among themselves over a host-only ring (sim/ring_allreduce.h);
  // the switches only forward its packets and the PSs never see them.
  CollectiveKind collective = CollectiveKind::atp;
  // ATP only: each tensor reduce-scattered instead (every worker keeps its own shard's sum,
  // and only that shard's values come down to it; docs/protocol.md §8.1).
  bool reduce_scatter = false;
  std::uint16_t values_per_packet = 256;
  float scale = 0;  // 0: chosen from the gradients' magnitude and the job's size
  TrainingPlan plan;
  GradientSource gradients;
};

struct ClusterSpec {
  // With `cluster` (a cluster file), its switches, parameter servers and jobs are the
  // cluster: jobs[i] then gives the training plan and gradients of the file's i-th job only.
  std::optional<control::ClusterConfig> cluster;
  std::vector<JobSpec> jobs;
  std::uint32_t pool_size = 1024;  // aggregators per switch
  engines::Policy policy = engines::Policy::atp;
  // false: the PS rack's switch forwards without aggregating (rack-level aggregation only).
  bool spine_aggregates = true;
  std::uint8_t parameter_servers = 1;
  // Under planned placement on ATP switches, the control plane lends an absent job's home to
  // a present job next to it (control/home_lending.h); false: every job keeps its own.
  bool lend_idle_homes = true;
  LinkSpec host_link;  // worker <-> rack switch, PS <-> PS-rack switch
  // The link of the first job's first worker, when it differs (the paper's loss experiment:
  // one worker drops its own packets).
  std::optional<LinkSpec> first_worker_link;
  LinkSpec core_link;  // rack switch <-> PS-rack switch
  engines::WorkerConfig worker_defaults;  // timers and windows; job fields are filled in
  std::uint64_t seed = 1;
  Duration time_limit = 60 * kSecond;  // simulated; unfinished jobs are reported as such
  // When set, every switch's trace is written there: rack<r>.jsonl and spine.jsonl.
  std::string trace_dir;
  // When set, the report's series has each job's aggregations per interval this long. Taking
  // it does not change the run (the same events in the same order).
  Duration sample_every = 0;
};

// One interval of the series: per job (in the report's job order), the seqs its PSs completed
// from a sum the switches finished (in network) and from parts they summed themselves (at the
// PS), and its fragments that met a busy aggregator.
struct JobInterval {
  std::uint64_t in_network = 0, at_ps = 0, collisions = 0;
};
struct SeriesSample {
  Time end = 0;  // the interval is (end - sample_every, end]
  std::vector<JobInterval> jobs;
};

struct JobReport {
  std::uint32_t job = 0;
  bool finished = false;
  bool exact = false;  // finished, and every result of every worker matched the exact sum
  std::string error;   // a worker's failure, if any
  std::uint64_t results_checked = 0, mismatches = 0;
  Time start = 0;            // the first compute phase's start
  Time completion_time = 0;
  Time first_iteration_end = 0;     // the latest worker's
  std::uint32_t samples_per_iteration = 0;  // per worker, from the training plan
  double model_scale = 1;                   // from the training plan
  Duration communication_time = 0;  // mean over workers
  Duration first_allreduce_time = 0;  // mean over workers: the run handshake, windows opening
  std::uint64_t tensor_bytes = 0;   // per worker, all iterations
  std::uint32_t iterations = 0;
  engines::WorkerStats workers;     // summed over the job's workers
  engines::SwitchJobCounters switches;  // summed over every switch
  engines::PsJobCounters ps;            // summed over every PS
  double fraction_in_network = 0;   // seqs the PS received as one complete sum
  bool departed = false;            // its switch entries were removed when it finished
  std::optional<std::uint32_t> static_first;  // its static slice at its first rack switch
};

struct ClusterReport {
  std::vector<JobReport> jobs;
  std::uint64_t events = 0;
  std::uint64_t trace_hash = 0;
  Time end_time = 0;
  LinkCounters links;
  engines::SwitchCounters switches;  // summed over every switch
  std::vector<SeriesSample> series;  // ClusterSpec::sample_every
  bool all_exact() const;
};

// Throws std::invalid_argument on an impossible spec.
ClusterReport run_cluster(const ClusterSpec& spec,
                          const Simulator::DropFilter& drop_filter = {});

// What every switch and parameter server of the simulated cluster holds at simulated time
// `when` (before any worker starts), node ids shown as the addresses they stand for: to
// compare with what the daemons install from the same file.
struct InstalledSwitchJob {
  engines::SwitchJob job;
  std::vector<runtime::Endpoint> downstream, upstream;
};
struct InstalledPsJob {
  engines::PsJob job;
  runtime::Endpoint downstream;
};
struct InstalledEntries {
  std::map<std::string, std::vector<InstalledSwitchJob>> switches;  // by switch name
  std::map<std::string, std::vector<InstalledPsJob>> servers;       // by PS name
};
InstalledEntries installed_at(const ClusterSpec& spec, Time when);

}  // namespace atp::sim
