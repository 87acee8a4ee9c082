// `atp worker`: one worker of a cluster file allreducing synthetic gradients over real UDP,
// checking every result bit for bit against the exact sum it computes locally (every worker's
// gradients are reproducible from the seed).
#include <chrono>
#include <thread>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include "apps/commands.h"
#include <nlohmann/json.hpp>

#include "libatp/communicator.h"
#include "workload/gradients.h"

namespace atp::apps {

namespace {

struct WorkerOptions {
  std::string config, json_out, progress_file;
  std::uint32_t job = 0, rank = 0, iterations = 3, tensors = 1;
  std::optional<std::uint16_t> run;  // default: the PS hands out a fresh one
  double compute_ms = 0;  // a training step's computation, between allreduces
  std::size_t floats = 1 << 20;
  std::uint64_t seed = 1;
  bool verify = true, json = false;
};

// What a worker's training loop measured.
struct TrainingOutcome {
  std::uint64_t mismatches = 0;
  double communication_s = 0;
  std::string error;  // empty: finished
};

// Tensors of iteration `it` whose result differs from the exact sum of every worker's input.
std::uint64_t mismatches_in(const WorkerOptions& o, const engines::WorkerConfig& wc,
                            const workload::GradientSource& gradients, std::uint32_t it,
                            const std::vector<std::vector<float>>& output) {
  workload::ExactSum exact(wc.values_per_packet, wc.scale, wc.job_workers);
  std::vector<float> expected(o.floats), scratch(o.floats);
  std::uint64_t mismatches = 0;
  for (std::uint32_t t = 0; t < o.tensors; ++t) {
    exact.reset(o.floats);
    for (std::uint32_t w = 0; w < wc.job_workers; ++w) {
      gradients.fill(o.job, w, it, t, scratch);
      exact.add(scratch);
    }
    exact.finish(expected);
    if (std::memcmp(expected.data(), output[t].data(), o.floats * 4) != 0) ++mismatches;
  }
  return mismatches;
}

TrainingOutcome train(const WorkerOptions& o, Communicator& comm) {
  const workload::GradientSource gradients{o.seed};
  std::vector<std::vector<float>> input(o.tensors, std::vector<float>(o.floats));
  std::vector<std::vector<float>> output(o.tensors, std::vector<float>(o.floats));
  TrainingOutcome out;
  for (std::uint32_t it = 0; it < o.iterations; ++it) {
    for (std::uint32_t t = 0; t < o.tensors; ++t) gradients.fill(o.job, o.rank, it, t, input[t]);
    if (o.compute_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.compute_ms));
    try {
      // A one-value allreduce is a barrier: the timed region starts when every worker is ready,
      // so one worker's verification never eats into another's measured communication.
      float ready = 0;
      comm.allreduce({&ready, 1}, {&ready, 1});
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::future<void>> done;
      for (std::uint32_t t = 0; t < o.tensors; ++t)
        done.push_back(comm.allreduce_async(input[t], output[t]));
      for (auto& d : done) d.get();
      out.communication_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } catch (const std::exception& e) {
      out.error = e.what();
      return out;
    }
    if (o.verify) out.mismatches += mismatches_in(o, comm.config(), gradients, it, output);
    if (!o.progress_file.empty()) std::ofstream(o.progress_file) << it + 1 << "\n";
  }
  return out;
}

void report(const WorkerOptions& o, Communicator& comm, const TrainingOutcome& t) {
  const auto stats = comm.stats();
  const double bytes = 4.0 * o.floats * o.tensors * o.iterations;
  const bool finished = t.error.empty();
  const auto run = comm.run();
  const double seconds = t.communication_s;
  nlohmann::json report = {
      {"job", o.job},
      {"rank", o.rank},
      {"run", run ? nlohmann::json(*run) : nlohmann::json(nullptr)},
      {"finished", finished},
      {"exact", finished && o.verify && t.mismatches == 0},
      {"verified", o.verify},
      {"mismatches", t.mismatches},
      {"error", t.error},
      {"iterations", o.iterations},
      {"tensor_bytes", bytes},
      {"communication_s", seconds},
      {"throughput_gbps", seconds > 0 ? bytes * 8 / seconds / 1e9 : 0.0},
      {"retransmissions", engines::retransmissions(stats)}};
  engines::for_each_field(stats, [&](const char* name, std::uint64_t v) { report[name] = v; });
  if (!o.json_out.empty()) std::ofstream(o.json_out) << report.dump() << "\n";
  if (o.json)
    std::cout << report.dump(2) << "\n";
  else
    std::cout << "job " << o.job << " rank " << o.rank << ": "
              << (finished ? (t.mismatches == 0 ? "exact" : "NOT EXACT") : "FAILED: " + t.error)
              << ", " << report["throughput_gbps"].get<double>() << " Gbit/s\n";
  set_exit_code(finished && t.mismatches == 0 ? 0 : 1);
}

void run_worker(const WorkerOptions& o) {
  const auto cluster = control::ClusterConfig::load(o.config);
  auto comm = Communicator::from_cluster(cluster, o.job, o.rank, o.run);
  const TrainingOutcome outcome = train(o, *comm);
  report(o, *comm, outcome);
}

}  // namespace

void add_worker_command(CLI::App& app) {
  static WorkerOptions o;
  auto* cmd = app.add_subcommand("worker", "Run one worker of a cluster file on real UDP");
  cmd->add_option("--config", o.config, "Cluster file (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--job", o.job, "Job id")->required();
  cmd->add_option("--rank", o.rank, "This worker's position in the job's workers list")->required();
  cmd->add_option("--run", o.run,
                  "This launch's run id (0..65535), the same for all the job's workers and "
                  "another for the next launch on the same daemons (the job's first PS refuses "
                  "one another launch used). Default: the job's first PS hands every worker of "
                  "a launch the same fresh one");
  cmd->add_option("--floats", o.floats, "Floats per tensor")->capture_default_str();
  cmd->add_option("--tensors", o.tensors, "Tensors per iteration (in flight together)")
      ->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "Iterations")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Gradient seed (all workers of a job must agree)")
      ->capture_default_str();
  cmd->add_flag("!--no-verify", o.verify, "Skip checking results against the exact sum");
  cmd->add_option("--json-out", o.json_out, "Write the report as JSON to this file");
  cmd->add_option("--progress-file", o.progress_file, "Write finished iterations here");
  cmd->add_option("--compute-ms", o.compute_ms,
                  "Idle this long before each allreduce, as a training step computes (untimed)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o.json, "Print the report as JSON");
  cmd->callback([] { run_worker(o); });
}

}  // namespace atp::apps
