// `atp switch` and `atp ps`: daemons that serve one switch or parameter server of a cluster
// file until SIGINT/SIGTERM, then log per-job statistics (and write them as JSON if asked).
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "apps/commands.h"
#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"

namespace atp::apps {

namespace {

struct DaemonOptions {
  std::string config, name, stats_json, log_level = "info";
};

void add_common(CLI::App* cmd, DaemonOptions& o, const char* what) {
  cmd->add_option("--config", o.config, "Cluster file (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--name", o.name, std::string("Which ") + what + " of the cluster file to run")
      ->required();
  cmd->add_option("--stats-json", o.stats_json, "Write per-job statistics here on exit");
  cmd->add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
}

template <typename Daemon>
void serve(const DaemonOptions& o, const char* kind) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  const auto cluster = control::ClusterConfig::load(o.config);
  Daemon daemon(cluster, o.name);
  runtime::EventLoop loop;
  loop.stop_on_signals();
  daemon.attach(loop);
  spdlog::info("{} '{}' serving on {}", kind, o.name, daemon.address().str());
  loop.run();
  const nlohmann::json stats = daemon.stats();
  spdlog::info("{} '{}' stopping: {}", kind, o.name, stats.dump());
  if (!o.stats_json.empty()) std::ofstream(o.stats_json) << stats.dump(2) << "\n";
}

}  // namespace

void add_daemon_commands(CLI::App& app) {
  static DaemonOptions sw, ps;
  auto* s = app.add_subcommand("switch", "Run one switch (level 1 or 2) of a cluster file");
  add_common(s, sw, "switch");
  s->callback([] { serve<daemons::SwitchDaemon>(sw, "switch"); });
  auto* p = app.add_subcommand("ps", "Run one parameter server of a cluster file");
  add_common(p, ps, "parameter server");
  p->callback([] { serve<daemons::PsDaemon>(ps, "ps"); });
}

}  // namespace atp::apps
