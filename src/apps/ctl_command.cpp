// `atp ctl`: talks to a running `atp switch` or `atp ps` over its control socket.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/secret_file.h"
#include "runtime/local_servers.h"

namespace atp::apps {

void add_ctl_command(CLI::App& app) {
  static std::string socket, config, secret_file;
  static std::uint32_t job = 0;
  auto* ctl = app.add_subcommand("ctl", "Control a running switch or parameter server");
  ctl->add_option("--socket", socket,
                  "The daemon's control socket (e.g. /tmp/atp-rack0.sock, or tcp://a.b.c.d:port)")
      ->required();
  ctl->add_option("--secret-file", secret_file,
                  "File whose first line is the daemon's control secret (TCP control)")
      ->check(CLI::ExistingFile);
  ctl->require_subcommand(1);
  auto send = [](nlohmann::json request) {
    // Over TCP only, and proved rather than sent (runtime/control_auth.h): a Unix socket's peer
    // is checked by its uid, and a daemon asks no secret there.
    const std::string secret = runtime::is_tcp_control(socket) && !secret_file.empty()
                                   ? read_secret_file(secret_file, "control secret")
                                   : std::string();
    const nlohmann::json reply = runtime::control_request(socket, request, runtime::kControlRequestBudget, secret);
    std::cout << reply.dump(2) << "\n";
    set_exit_code(reply.value("ok", false) ? 0 : 1);
  };
  ctl->add_subcommand("list", "List the jobs installed")->callback([send] { send({{"cmd", "list"}}); });
  ctl->add_subcommand("stats", "Show per-job statistics")->callback([send] { send({{"cmd", "stats"}}); });
  auto* admit = ctl->add_subcommand("admit", "Install a job as a cluster file describes it");
  admit->add_option("--config", config, "Cluster file with the job")->required()->check(CLI::ExistingFile);
  admit->add_option("--job", job, "Job id")->required();
  admit->callback([send] {
    send({{"cmd", "admit"}, {"config", std::filesystem::absolute(config).string()}, {"job", job}});
  });
  auto* remove = ctl->add_subcommand("remove", "Remove a job (a switch frees its aggregators)");
  remove->add_option("--job", job, "Job id")->required();
  remove->callback([send] { send({{"cmd", "remove"}, {"job", job}}); });
}

}  // namespace atp::apps
