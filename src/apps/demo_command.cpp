// `atp demo`: two jobs of four workers each allreduce random gradients through shared
// switches and a PS, and every result is checked against the exact sum.
//
// Until the daemons exist (issue: real packets), the demo runs the engines in-process on the
// deterministic simulator, over two racks with lossy links.
#include <chrono>
#include <iostream>

#include "apps/commands.h"
#include "apps/sim_report.h"
#include "sim/scenario.h"

namespace atp::apps {

void add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "demo", "Two jobs x four workers allreduce through shared switches; checks exactness");
  static sim::Scenario s = [] {
    sim::Scenario d;
    d.racks = 2;
    d.workers_per_rack = 2;
    d.jobs = 2;
    d.aggregators = 96;  // fewer than the jobs' windows together: they must share
    d.window = 64;
    d.tensor_bytes = 8 << 20;
    d.iterations = 3;
    d.loss = 0.001;
    d.link_gbps = 100;
    d.seed = 7;
    return d;
  }();
  static bool json = false;
  cmd->add_option("--tensor-bytes", s.tensor_bytes, "Gradient bytes per worker per iteration")
      ->capture_default_str();
  cmd->add_option("--iterations", s.iterations, "Iterations")->capture_default_str();
  cmd->add_option("--loss", s.loss, "Packet loss probability per link")->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_flag("--json", json, "Print one JSON object instead of a table");
  cmd->callback([] {
    if (!json) {
      const double total_mb = static_cast<double>(s.tensor_bytes) * s.iterations * s.jobs *
                              s.racks * s.workers_per_rack / (1 << 20);
      std::cout << "ATP demo (in-process simulator): " << s.jobs << " jobs x "
                << s.racks * s.workers_per_rack << " workers over " << s.racks
                << " racks, " << total_mb << " MiB of gradients, " << s.aggregators
                << " aggregators per switch, loss " << s.loss << " per link\n";
    }
    const auto start = std::chrono::steady_clock::now();
    const sim::ClusterReport report = sim::run_cluster(sim::to_cluster_spec(s));
    RunInfo info;
    info.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    info.reproduce = s.command_line();
    if (json)
      std::cout << to_json(report, info).dump(2) << "\n";
    else
      std::cout << to_table(report, info);
    set_exit_code(report.all_exact() ? 0 : 1);
  });
}

}  // namespace atp::apps
