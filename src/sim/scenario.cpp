#include "sim/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "workload/rng.h"
#include "workload/models.h"

namespace atp::sim {

std::string Scenario::command_line() const {
  const std::string layers = fmt::format("{}", fmt::join(layer_bytes, ","));
  // A cluster file stands for the options that describe the cluster.
  const std::string cluster =
      cluster_file.empty()
          ? fmt::format("--racks {} --workers-per-rack {} --jobs {} --aggregators {} --window {} "
                        "--values-per-packet {} --policy {} --parameter-servers {}",
                        racks, workers_per_rack, jobs, aggregators, window, values_per_packet,
                        policy, parameter_servers)
          : fmt::format("--cluster {}", cluster_file);
  return fmt::format(
      "atp sim {} --tensor-bytes {} --iterations {} --compute-us {} --link-gbps {} "
      "--delay-us {} --loss {} --reorder {} --duplicate {} --ecn-threshold {} "
      "--overflow-fraction {} --min-rto-us {} --arrival-gap-us {} --time-limit-s {} --seed {}{}{}{}{}{}{}{}{}{}",
      cluster, tensor_bytes, iterations, compute_us, link_gbps, delay_us, loss, reorder,
      duplicate, ecn_threshold, overflow_fraction, min_rto_us, arrival_gap_us, time_limit_s, seed,
      layers.empty() ? "" : " --layers " + layers,
      loss_one_worker > 0 ? fmt::format(" --loss-one-worker {}", loss_one_worker) : "",
      ring > 0 ? fmt::format(" --ring {}", ring) : "",
      aggregator_window ? " --aggregator-window" : "",
      borrow_aggregators ? " --borrow-aggregators" : "", keep_homes ? " --keep-homes" : "",
      placement != "planned" ? " --placement " + placement : "",
      no_congestion_control ? " --no-congestion-control" : "", rack_only ? " --rack-only" : "") +
         (frame_bytes > 0 ? fmt::format(" --frame-bytes {}", frame_bytes) : "") +
         model_options();
}

// The options of model workloads and the baseline collective, when they differ from the
// defaults.
std::string Scenario::model_options() const {
  std::string out;
  if (!models.empty()) {
    out += fmt::format(" --model {} --model-scale {} --gpu {} --bucket-bytes {}{}",
                       fmt::join(models, ","), model_scale, gpu, bucket_bytes,
                       no_overlap ? " --no-overlap" : "");
  }
  if (collective != "atp") out += " --collective " + collective;
  if (reduce_scatter) out += " --reduce-scatter";
  if (core_gbps > 0) out += fmt::format(" --core-gbps {}", core_gbps);
  return out;
}

namespace {

// What the simulated switches' registers may take of this machine's memory in all.
constexpr std::uint64_t kMaxRegisterBytes = std::uint64_t{8} << 30;

// Bytes of each tensor a job allreduces per iteration, without a model.
std::vector<std::uint64_t> tensor_bytes_of(const Scenario& s) {
  return s.layer_bytes.empty() ? std::vector<std::uint64_t>{s.tensor_bytes} : s.layer_bytes;
}

// A model's iteration (workload/models.h) as the training loop's plan.
void set_model_plan(const Scenario& s, const std::string& model, TrainingPlan& plan) {
  const workload::Model m = workload::model_named(model);
  const workload::IterationPlan it = workload::plan_iteration(
      m, workload::gpu_flops(s.gpu), s.model_scale, s.bucket_bytes, !s.no_overlap);
  for (const workload::Bucket& b : it.buckets) {
    plan.tensor_sizes.push_back(static_cast<std::size_t>(b.values));
    plan.ready.push_back(static_cast<Duration>(b.ready_s * kSecond));
  }
  plan.compute = static_cast<Duration>(it.compute_s * kSecond);
  // Rounding must not put a bucket after the end of compute.
  for (Duration& r : plan.ready) r = std::min(r, plan.compute);
  plan.samples_per_iteration = m.batch;
  plan.model_scale = s.model_scale;
}

// The baseline collective, and what it cannot do.
CollectiveKind parse_collective(const Scenario& s) {
  if (s.collective == "atp") return CollectiveKind::atp;
  if (s.collective != "ring") throw std::invalid_argument("--collective must be atp or ring");
  if (s.reduce_scatter)
    throw std::invalid_argument("--reduce-scatter is ATP's: the ring baseline allreduces");
  if (s.loss > 0 || s.loss_one_worker > 0 || s.reorder > 0 || s.duplicate > 0)
    throw std::invalid_argument(
        "--collective ring assumes a lossless fabric (as NCCL on RoCE does): no --loss, "
        "--loss-one-worker, --reorder or --duplicate");
  if (s.overflow_fraction > 0)
    throw std::invalid_argument("--collective ring carries int32 only: no --overflow-fraction");
  return CollectiveKind::ring;
}

// Job j of the scenario: every job alike but for its model, its start and its gradients.
JobSpec job_spec(const Scenario& s, engines::Policy policy, CollectiveKind collective,
                 unsigned j) {
  JobSpec job;
  job.workers_per_rack.assign(s.racks, static_cast<std::uint8_t>(s.workers_per_rack));
  job.window = s.window;
  // SwitchML-style static partitioning sizes each job's window to its slice of the pool,
  // so a job never collides with itself (and never uses more than its share). The ring
  // baseline holds no aggregators.
  const std::uint32_t slice = s.aggregators / s.jobs;
  if (policy == engines::Policy::static_partition && slice > 0 &&
      collective == CollectiveKind::atp)
    job.window = std::min(job.window, std::bit_floor(slice));
  job.ring = s.ring;
  job.aggregator_window = s.aggregator_window;
  job.borrow_aggregators = s.borrow_aggregators;
  job.congestion_control = !s.no_congestion_control;
  if (!engines::parse_placement(s.placement, job.placement))
    throw std::invalid_argument("--placement must be planned, hash or linear");
  job.values_per_packet = s.values_per_packet;
  job.collective = collective;
  job.reduce_scatter = s.reduce_scatter;
  job.plan.iterations = s.iterations;
  const bool synthetic = s.models.empty() || s.models[j % s.models.size()] == kSyntheticJob;
  if (synthetic) {
    for (std::uint64_t b : tensor_bytes_of(s))
      job.plan.tensor_sizes.push_back(static_cast<std::size_t>(b / 4));
    job.plan.compute = static_cast<Duration>(s.compute_us * kMicrosecond);
  } else {
    set_model_plan(s, s.models[j % s.models.size()], job.plan);
  }
  // Independent jobs are out of phase: each starts at a seeded offset within one compute
  // phase (all of a job's workers together).
  workload::Rng phase(s.seed * 7919 + j);
  job.plan.start = static_cast<Duration>(j * s.arrival_gap_us * kMicrosecond) +
                   static_cast<Duration>(phase.uniform() * static_cast<double>(job.plan.compute));
  job.gradients.seed = s.seed * 1000003 + j;
  job.gradients.overflow_fraction = s.overflow_fraction;
  return job;
}

}  // namespace

ClusterSpec to_cluster_spec(const Scenario& s) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (s.racks == 0 || s.racks > 32) bad("--racks must be 1..32");
  if (s.workers_per_rack == 0 || s.workers_per_rack > 32) bad("--workers-per-rack must be 1..32");
  if (s.jobs == 0) bad("--jobs must be at least 1");
  if (!valid_ring(s.window, s.ring))
    bad("--ring must be a power of two from --window up to 2^20 (or 0)");
  for (std::uint64_t b : tensor_bytes_of(s))
    if (b % 4 != 0) bad("--tensor-bytes and --layers must be multiples of 4 (float32 values)");
  if (s.parameter_servers == 0 || s.parameter_servers > 255)
    bad("--parameter-servers must be 1..255");
  for (double p : {s.loss, s.loss_one_worker, s.reorder, s.duplicate, s.overflow_fraction})
    if (!(p >= 0 && p < 1))
      bad("probabilities (--loss, --loss-one-worker, --reorder, --duplicate) must be in [0, 1)");
  // Written so that NaN fails too: a NaN compares false with everything.
  auto finite_in = [&](double v, double low, double high, const std::string& what) {
    if (!(std::isfinite(v) && v >= low && v <= high)) bad(what);
  };
  finite_in(s.link_gbps, 1e-6, 1e6, "--link-gbps must be a finite rate in (0, 1e6]");
  finite_in(s.core_gbps, 0, 1e6, "--core-gbps must be a finite rate in [0, 1e6]");
  finite_in(s.delay_us, 0, 1e9, "--delay-us must be finite and 0 or more");
  finite_in(s.compute_us, 0, 1e12, "--compute-us must be finite and 0 or more");
  finite_in(s.min_rto_us, 0, 1e9, "--min-rto-us must be finite and 0 or more");
  finite_in(s.time_limit_s, 1e-6, 1e7, "--time-limit-s must be finite and positive");
  finite_in(s.arrival_gap_us, 0, 1e12, "--arrival-gap-us must be finite and 0 or more");

  if (!s.models.empty()) {
    const bool any_synthetic =
        std::find(s.models.begin(), s.models.end(), kSyntheticJob) != s.models.end();
    if (!any_synthetic && (!s.layer_bytes.empty() || s.compute_us > 0))
      bad("--model gives the tensors and the compute time: drop --layers and --compute-us "
          "(or name a synthetic job among the models, which runs them)");
    finite_in(s.model_scale, 1, 1e6, "--model-scale must be in [1, 1e6]");
    if (s.bucket_bytes < 4) bad("--bucket-bytes must be at least 4");
    for (const auto& m : s.models)
      if (m != kSyntheticJob) workload::model_named(m);  // names the bad one
    workload::gpu_flops(s.gpu);
  }
  const CollectiveKind collective = parse_collective(s);

  ClusterSpec spec;
  if (!s.cluster_file.empty()) spec.cluster = control::ClusterConfig::load(s.cluster_file);
  if (!engines::parse_policy(s.policy, spec.policy)) bad("--policy must be atp, static or none");
  spec.pool_size = s.aggregators;
  if (spec.pool_size == 0 && spec.policy != engines::Policy::none)
    bad("--aggregators must be at least 1 (or use --policy none)");
  // Every switch holds the pool's registers: K values and a few words of state per aggregator.
  const double register_bytes = double(s.racks + 1) * s.aggregators * (4.0 * s.values_per_packet + 32);
  if (register_bytes > kMaxRegisterBytes)
    bad(fmt::format("--aggregators {} would need {:.1f} GiB of switch registers over {} switches "
                    "(at most {} GiB)", s.aggregators, register_bytes / (1 << 30), s.racks + 1,
                    kMaxRegisterBytes >> 30));
  spec.parameter_servers = static_cast<std::uint8_t>(s.parameter_servers);
  spec.seed = s.seed;
  spec.time_limit = static_cast<Duration>(s.time_limit_s * kSecond);

  LinkSpec link;
  link.gbps = s.link_gbps;
  link.delay = static_cast<Duration>(s.delay_us * kMicrosecond);
  link.frame_bytes = s.frame_bytes;
  link.loss = s.loss;
  link.reorder = s.reorder;
  link.duplicate = s.duplicate;
  link.ecn_bytes = s.ecn_threshold;
  spec.host_link = link;
  spec.core_link = link;
  if (s.core_gbps > 0) spec.core_link.gbps = s.core_gbps;
  if (s.loss_one_worker > 0) {
    spec.first_worker_link = link;
    spec.first_worker_link->loss = 1 - (1 - s.loss) * (1 - s.loss_one_worker);
  }

  // A timer shorter than the path's bare round trip (worker, rack, spine, PS and back: six
  // links) fires before any result can arrive: every fragment is resent, forever.
  const double round_trip_us = std::max(1.0, 6 * s.delay_us);
  if (s.min_rto_us > 0 && s.min_rto_us < round_trip_us)
    bad(fmt::format("--min-rto-us {} is below the path's round trip ({} us: six links of "
                    "--delay-us): every fragment would time out before its result could arrive",
                    s.min_rto_us, round_trip_us));
  // Timers scaled to the path: a few round trips of the slowest plausible queue, and never
  // under two ECN thresholds of bytes at the host rate. ECN keeps each queue near its
  // threshold, not below it, so a round trip may grow by a queue or two at once; a floor under
  // that fired the timers of every fragment waiting behind them (issue 48: 10 Gbit/s links with
  // 256 KiB thresholds, 210 us each, under a 224 us floor: 6,112 spurious timeouts for one job
  // of seed 400454 and half of static's throughput; none, and 1.02 of static, with this floor).
  const double ecn_queue_us = double(s.ecn_threshold) * 8 / (s.link_gbps * 1e3);
  spec.worker_defaults.min_rto =
      s.min_rto_us > 0 ? static_cast<Duration>(s.min_rto_us * kMicrosecond)
                       : std::max<Duration>({200 * kMicrosecond, 20 * link.delay,
                                             static_cast<Duration>(2 * ecn_queue_us * kMicrosecond)});
  spec.worker_defaults.initial_rto = 4 * spec.worker_defaults.min_rto;
  // Backoff stops at a data-center scale: waiting seconds after a burst of losses only idles.
  spec.worker_defaults.max_rto = 64 * spec.worker_defaults.min_rto;
  spec.worker_defaults.deadline = spec.time_limit;
  spec.spine_aggregates = !s.rack_only;
  spec.lend_idle_homes = !s.keep_homes;

  const std::size_t jobs = spec.cluster ? spec.cluster->jobs().size() : s.jobs;
  for (unsigned j = 0; j < jobs; ++j) spec.jobs.push_back(job_spec(s, spec.policy, collective, j));
  return spec;
}

}  // namespace atp::sim
