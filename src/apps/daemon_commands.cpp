// `atp switch` and `atp ps`: daemons that serve one switch or parameter server of a cluster
// file until SIGINT/SIGTERM, then log per-job statistics (and write them as JSON if asked).
#include <spdlog/spdlog.h>

#include <fstream>
#include <memory>
#include <optional>
#include <iostream>

#include "apps/commands.h"
#include "apps/secret_file.h"
#include "daemons/control_requests.h"
#include "daemons/p4_switch_agent.h"
#include "daemons/tofino_switch_agent.h"
#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"
#include "runtime/bfrt_shell.h"
#include "runtime/bmv2_cli.h"
#include "runtime/local_servers.h"

namespace atp::apps {

namespace {

struct DaemonOptions {
  std::string config, name, stats_json, log_level = "info", control, metrics_address = "127.0.0.1";
  std::string control_secret_file;
  int metrics_port = -1;
};

void add_common(CLI::App* cmd, DaemonOptions& o, const char* what) {
  cmd->add_option("--config", o.config, "Cluster file (TOML)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--name", o.name, std::string("Which ") + what + " of the cluster file to run")
      ->required();
  cmd->add_option("--stats-json", o.stats_json, "Write per-job statistics here on exit");
  cmd->add_option("--log-level", o.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  cmd->add_option("--control", o.control,
                  "Control socket for `atp ctl` and the controller: a Unix socket path or "
                  "tcp://a.b.c.d:port (default: the file's `control`, else /tmp/atp-NAME.sock; "
                  "'off' disables)");
  cmd->add_option("--control-secret-file", o.control_secret_file,
                  "File whose first line is the control secret callers must prove they hold "
                  "(needed with a tcp://a.b.c.d:port control address; never sent)");
  cmd->add_option("--metrics-port", o.metrics_port,
                  "Serve Prometheus metrics over HTTP on this TCP port (0: any free port)");
  cmd->add_option("--metrics-address", o.metrics_address, "Address for the metrics port")
      ->capture_default_str();
}

// The daemon's control socket as the cluster file names it.
std::string control_of(const control::ClusterConfig& cluster, const std::string& name) {
  for (const auto& s : cluster.switches())
    if (s.name == name) return s.control;
  for (const auto& s : cluster.servers())
    if (s.name == name) return s.control;
  return control::default_control_socket(name);
}

// Serves the daemon `make(cluster)` builds until SIGINT/SIGTERM: its control socket, metrics.
template <typename Make>
void serve(const DaemonOptions& o, const char* kind, Make make) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  const auto cluster = control::ClusterConfig::load(o.config);
  auto made = make(cluster);
  auto& daemon = *made;
  runtime::EventLoop loop;
  loop.stop_on_signals();
  daemon.attach(loop);
  std::optional<runtime::ControlSocket> control;
  const std::string control_path =
      o.control.empty() ? control_of(cluster, o.name) : o.control;
  const std::string secret = read_secret_file(o.control_secret_file, "control secret");
  const bool tcp = runtime::is_tcp_control(control_path);
  if (secret.empty() && tcp)
    throw std::invalid_argument("a control socket on TCP (" + control_path +
                                ") needs --control-secret-file");
  // Over TCP callers prove they hold the secret (runtime/control_auth.h); on a Unix socket the
  // peer is checked by its uid instead.
  if (control_path != "off")
    control.emplace(
        loop, control_path, [&daemon](const nlohmann::json& r) { return daemons::answer_control(daemon, r); },
        tcp ? secret : std::string());
  std::optional<runtime::MetricsServer> metrics;
  if (o.metrics_port >= 0) {
    metrics.emplace(loop, o.metrics_address, static_cast<std::uint16_t>(o.metrics_port),
                    [&] { return runtime::prometheus_text(kind, o.name, daemon.stats()); });
    spdlog::info("{} '{}' metrics on http://{}:{}/metrics", kind, o.name, o.metrics_address,
                 metrics->port());
  }
  spdlog::info("{} '{}' serving on {}{}", kind, o.name, daemon.address().str(),
               control ? ", control socket " + control_path : "");
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
  s->callback([] {
    serve(sw, "switch", [](const auto& c) { return std::make_unique<daemons::SwitchDaemon>(c, sw.name); });
  });
  auto* p = app.add_subcommand("ps", "Run one parameter server of a cluster file");
  add_common(p, ps, "parameter server");
  p->callback([] {
    serve(ps, "ps", [](const auto& c) { return std::make_unique<daemons::PsDaemon>(c, ps.name); });
  });
}

void add_p4_agent_command(CLI::App& p4) {
  static DaemonOptions o;
  static std::string target = "bmv2", cli = "simple_switch_CLI", shell, script_dir, program = "atp";
  static std::uint16_t thrift_port = 9090;
  auto* a = p4.add_subcommand(
      "agent", "Run the control plane of one P4 switch of a cluster file: its entries at start, "
               "jobs admitted and removed over its control socket (as `atp switch`); on BMv2 "
               "also its claim clock and member learning");
  add_common(a, o, "P4 switch");
  a->add_option("--target", target,
                "bmv2 (simple_switch_CLI) or tofino (bfrt_python scripts run by --bfrt-shell)")
      ->check(CLI::IsMember({"bmv2", "tofino"}))
      ->capture_default_str();
  a->add_option("--thrift-port", thrift_port, "BMv2: simple_switch's runtime (thrift) port")
      ->capture_default_str();
  a->add_option("--cli", cli, "BMv2: the runtime CLI program")->capture_default_str();
  a->add_option("--bfrt-shell", shell,
                "Tofino: the SDE's shell in batch mode, each script's path appended (e.g. "
                "\"$SDE/run_bfshell.sh -b\"); split at spaces");
  a->add_option("--script-dir", script_dir,
                "Tofino: the folder the agent writes each change's script into (kept; the "
                "scripts carry job tokens: a folder of this user's alone, not a link, no group "
                "or other write, or the agent refuses it)")
      ->check(CLI::ExistingDirectory);
  a->add_option("--program", program, "Tofino: the program's name under bfrt")
      ->capture_default_str();
  a->callback([] {
    if (target == "bmv2") {
      serve(o, "p4 agent", [](const auto& c) {
        return std::make_unique<daemons::P4SwitchAgent>(
            c, o.name, std::make_unique<runtime::Bmv2Cli>(cli, thrift_port));
      });
      return;
    }
    if (shell.empty() || script_dir.empty())
      throw CLI::ValidationError("p4 agent", "--target tofino needs --bfrt-shell and --script-dir");
    std::vector<std::string> words;
    for (std::size_t at = 0; at < shell.size();) {
      const std::size_t end = std::min(shell.find(' ', at), shell.size());
      if (end > at) words.push_back(shell.substr(at, end - at));
      at = end + 1;
    }
    serve(o, "p4 agent", [words](const auto& c) {
      runtime::BfrtShell bfshell(words);
      return std::make_unique<daemons::TofinoSwitchAgent>(
          c, o.name, [bfshell](const std::string& path) { bfshell.run_script(path); }, script_dir,
          program);
    });
  });
}

}  // namespace atp::apps
