// `atp sim`: the deterministic simulator from flags; a table for people, --json for programs.
#include <chrono>
#include <iostream>

#include "apps/commands.h"
#include "apps/sim_report.h"
#include "sim/scenario.h"
#include "sim/scenario_draw.h"

namespace atp::apps {

namespace {

// How a run is watched; none of it changes the run.
struct Outputs {
  bool json = false;
  std::string trace_dir;
  double series_ms = 0;
};

// A scenario drawn from a seed (sim/scenario_draw.h) instead of the options.
struct Draw {
  std::uint64_t seed = 0;
  std::string variant = "atp";
};

// What a drawn scenario was, for the sweep script to group its results by.
nlohmann::json drawn_terms(const sim::DrawnScenario& d, const std::string& variant) {
  const sim::Scenario& s = d.scenario;
  return {{"scenario_seed", s.seed}, {"variant", variant}, {"racks", s.racks},
          {"workers_per_rack", s.workers_per_rack}, {"jobs", s.jobs}, {"models", s.models},
          {"link_gbps", s.link_gbps}, {"core_gbps", s.core_gbps}, {"delay_us", s.delay_us},
          {"values_per_packet", s.values_per_packet}, {"window", s.window},
          {"aggregators", s.aggregators}, {"pool_share", d.pool_share},
          {"parameter_servers", s.parameter_servers}, {"loss", d.loss},
          {"loss_on_one_worker", d.loss_on_one_worker}, {"arrival_gap_us", s.arrival_gap_us},
          {"compute_us", s.compute_us}, {"tensor_bytes", s.tensor_bytes},
          {"model_scale", s.model_scale}, {"iterations", s.iterations}};
}

// With --scenario-seed the draw is the whole scenario: any option that would change it is
// refused rather than silently overridden (the printed command line takes changes).
void refuse_scenario_options(const CLI::App& cmd) {
  for (const CLI::Option* o : cmd.get_options()) {
    const std::string name = o->get_name();
    if (o->count() == 0 || name == "--scenario-seed" || name == "--scenario-variant" ||
        name == "--json" || name == "--series-ms" || name == "--trace-dir" || name == "--help")
      continue;
    throw CLI::ValidationError(name, "--scenario-seed draws the whole scenario; choose a "
                                     "baseline with --scenario-variant, or change the command "
                                     "line it prints (reproduce)");
  }
}

void run_sim(const sim::Scenario& scenario, const Outputs& outputs, nlohmann::json terms = {}) {
  sim::ClusterSpec spec = sim::to_cluster_spec(scenario);
  spec.trace_dir = outputs.trace_dir;
  spec.sample_every = static_cast<Duration>(outputs.series_ms * kMillisecond);
  const auto start = std::chrono::steady_clock::now();
  const sim::ClusterReport report = sim::run_cluster(spec);
  RunInfo info;
  info.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  info.reproduce = scenario.command_line();
  info.scenario = std::move(terms);
  if (outputs.json)
    std::cout << to_json(report, info).dump(2) << "\n";
  else
    std::cout << to_table(report, info);
  set_exit_code(report.all_exact() ? 0 : 1);
}

}  // namespace

void add_sim_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sim", "Run jobs on a simulated cluster (deterministic: same seed, same run)");
  static sim::Scenario s;
  static Outputs outputs;
  static Draw draw;
  auto* cluster = cmd->add_option("--cluster", s.cluster_file,
                  "Run a cluster file's switches, PSs and jobs (docs/configuration.md) instead "
                  "of --racks, --workers-per-rack, --jobs, --aggregators, --window, "
                  "--values-per-packet, --policy and --parameter-servers")
      ->check(CLI::ExistingFile);
  cmd->add_option("--racks", s.racks, "Racks of workers")->capture_default_str();
  cmd->add_option("--workers-per-rack", s.workers_per_rack, "Workers of each job in each rack")
      ->capture_default_str();
  cmd->add_option("--jobs", s.jobs, "Concurrent training jobs")->capture_default_str();
  cmd->add_option("--aggregators", s.aggregators, "Aggregators per switch")->capture_default_str();
  cmd->add_option("--ring", s.ring,
                  "Seqs each worker tracks at once, holes included (power of two, at least "
                  "--window; 0: 16 windows): the worker sends on past fragments waiting for "
                  "recovery")
      ->capture_default_str();
  cmd->add_flag("--no-congestion-control", s.no_congestion_control,
               "Workers keep their windows at the ceiling whatever ECN marks and timeouts say "
               "(the paper's Fig. 15 baseline)");
  cmd->add_flag("--rack-only", s.rack_only,
               "The PS rack's switch forwards without aggregating: rack-level aggregation only "
               "(the paper's Fig. 9 baseline)");
  cmd->add_option("--placement", s.placement,
                  "Where each job's fragments aggregate: planned (each job's PS places them on "
                  "its home slice of the pool, in turn), hash (the paper's ATP: "
                  "hashed lanes, never moved) or linear (the same indices for every job: the "
                  "paper's Fig. 14 strawman)")
      ->check(CLI::IsMember({"planned", "hash", "linear"}))
      ->capture_default_str();
  cmd->add_flag("--borrow-aggregators", s.borrow_aggregators,
               "With planned placement, the PSs also plan seqs on other jobs' home aggregators "
               "while those look idle, backing off when they turn out busy (measured below "
               "the default, down to 0.64 of static slices: docs/sharing.md); such a job's "
               "home is never lent");
  cmd->add_flag("--keep-homes", s.keep_homes,
               "With planned placement, every job keeps to its own home slice even while "
               "another job is absent (by default an absent job's home is lent to the present "
               "job next to it: docs/sharing.md)");
  cmd->add_flag("--aggregator-window", s.aggregator_window,
               "Workers also keep an A2TP-style aggregator window: halved by results whose seq "
               "met a busy aggregator, never above the congestion window");
  cmd->add_option("--window", s.window,
                  "Fragments in flight per worker at most (power of two), one aggregator lane "
                  "each")
      ->capture_default_str();
  cmd->add_option("--values-per-packet", s.values_per_packet, "K: int32 values per packet")
      ->capture_default_str();
  cmd->add_option("--tensor-bytes", s.tensor_bytes, "Gradient bytes per iteration")
      ->capture_default_str();
  cmd->add_option("--layers", s.layer_bytes,
                  "Per-layer tensor bytes, comma-separated (replaces --tensor-bytes)")
      ->delimiter(',');
  cmd->add_option("--iterations", s.iterations, "Training iterations")->capture_default_str();
  cmd->add_option(
      "--model", s.models,
      "Train models from the zoo (resnet50, vgg16, bert-base, bert-large; comma-separated: "
      "job j trains the (j mod n)-th): their DDP buckets, backward pass overlapping the "
      "allreduce, and compute time on --gpu replace --tensor-bytes, --layers and "
      "--compute-us, which a 'synthetic' entry runs instead")
      ->delimiter(',');
  cmd->add_option("--model-scale", s.model_scale,
                  "Divide every model's gradient bytes and compute time by this (their ratio "
                  "stays; 1: full size)")
      ->capture_default_str();
  cmd->add_option("--gpu", s.gpu, "The GPU the models' compute time is for: v100 or a100")
      ->check(CLI::IsMember({"v100", "a100"}))
      ->capture_default_str();
  cmd->add_option("--bucket-bytes", s.bucket_bytes,
                  "Gradient bucket size before --model-scale (DDP's bucket_cap_mb)")
      ->capture_default_str();
  cmd->add_flag("--no-overlap", s.no_overlap,
                "Allreduce a model's buckets only after the whole backward pass");
  cmd->add_option("--collective", s.collective,
                  "atp, or ring: the host-only ring allreduce baseline (NCCL/Horovod-style) on "
                  "the same links, switches only forwarding")
      ->check(CLI::IsMember({"atp", "ring"}))
      ->capture_default_str();
  cmd->add_flag("--reduce-scatter", s.reduce_scatter,
                "Reduce-scatter every tensor instead of allreducing it: each worker keeps its own "
                "shard's sum, and only that shard's values come down to it (ATP only)");
  cmd->add_option("--compute-us", s.compute_us, "Compute time per iteration (us)")
      ->capture_default_str();
  cmd->add_option("--link-gbps", s.link_gbps, "Link rate (Gbit/s)")->capture_default_str();
  cmd->add_option("--core-gbps", s.core_gbps,
                  "Rate of the links between switches (Gbit/s; 0: --link-gbps); data-center "
                  "uplinks are usually faster than host links")
      ->capture_default_str();
  cmd->add_option("--delay-us", s.delay_us, "Propagation delay per link (us)")
      ->capture_default_str();
  cmd->add_option("--frame-bytes", s.frame_bytes,
                  "Wire bytes each packet takes beyond the ATP packet on every link: 66 for "
                  "Ethernet, IPv4 and UDP headers, FCS, preamble and gap, so that speeds are a "
                  "real link's (docs/p4.md, the goodput model); 0 counts the ATP packet alone")
      ->capture_default_str()->check(CLI::Range(0u, 9000u));
  cmd->add_option("--loss", s.loss, "Packet loss probability per link")->capture_default_str();
  cmd->add_option("--loss-one-worker", s.loss_one_worker,
                  "Loss probability on the first job's first worker's link only, both ways (the "
                  "paper's loss experiment), on top of --loss")
      ->capture_default_str();
  cmd->add_option("--reorder", s.reorder, "Probability a packet is delayed past later ones")
      ->capture_default_str();
  cmd->add_option("--duplicate", s.duplicate, "Packet duplication probability per link")
      ->capture_default_str();
  cmd->add_option("--ecn-threshold", s.ecn_threshold, "Queue bytes above which ECN is marked")
      ->capture_default_str();
  cmd->add_option("--policy", s.policy, "Aggregator policy: atp, static or none")
      ->capture_default_str();
  cmd->add_option("--parameter-servers", s.parameter_servers, "Parameter servers (shards)")
      ->capture_default_str();
  cmd->add_option("--overflow-fraction", s.overflow_fraction,
                  "Share of gradient values too large for int32 (tests the float path)")
      ->capture_default_str();
  cmd->add_option("--min-rto-us", s.min_rto_us,
                  "Lowest retransmission timeout (us); 0: max(200 us, 20 x link delay)")
      ->capture_default_str();
  cmd->add_option("--arrival-gap-us", s.arrival_gap_us,
                  "Job j arrives j x this late; each job leaves when done (its switch entries "
                  "and static slice freed)")
      ->capture_default_str();
  cmd->add_option("--time-limit-s", s.time_limit_s, "Simulated seconds before giving up")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_option("--scenario-seed", draw.seed,
                  "Run the scenario drawn from this seed (docs/simulator.md, random scenarios): "
                  "fabric, jobs and models, K, window, pool, PSs, loss and arrivals; the "
                  "report's reproduce line is the same run as plain options")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--scenario-variant", draw.variant,
                  "With --scenario-seed: atp (as drawn), static (static slices, the same loss), "
                  "lossless (ATP without loss) or static-lossless")
      ->check(CLI::IsMember(sim::scenario_variants()))
      ->capture_default_str();
  cmd->add_flag("--json", outputs.json, "Print one JSON object instead of a table");
  cmd->add_option("--series-ms", outputs.series_ms,
                  "With --json: each job's aggregations in network and at its PSs, and its "
                  "collisions, per interval of this many simulated ms (\"series\")")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--trace-dir", outputs.trace_dir,
                  "Write each switch's trace there (rack<r>.jsonl, spine.jsonl) for `atp trace "
                  "replay` and the P4 conformance harness")
      ->check(CLI::ExistingDirectory);
  // The file says these; giving them too would be silently ignored.
  for (const char* name : {"--racks", "--workers-per-rack", "--jobs", "--aggregators",
                           "--window", "--ring", "--values-per-packet", "--policy",
                           "--parameter-servers"})
    cluster->excludes(cmd->get_option(name));
  // --config belongs to the top-level app (CLI11 reads config files there); fallthrough lets
  // it follow `sim` on the command line.
  cmd->fallthrough();
  cmd->callback([cmd] {
    if (draw.seed == 0) {
      if (cmd->count("--scenario-variant") > 0)
        throw CLI::ValidationError("--scenario-variant", "needs --scenario-seed");
      return run_sim(s, outputs);
    }
    refuse_scenario_options(*cmd);
    const sim::DrawnScenario drawn = sim::draw_scenario(draw.seed);
    run_sim(sim::scenario_variant(drawn.scenario, draw.variant), outputs,
            drawn_terms(drawn, draw.variant));
  });
}

}  // namespace atp::apps
