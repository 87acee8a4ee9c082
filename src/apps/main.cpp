// `atp`: one program, one subcommand per part of the system.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "apps/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ATP: in-network gradient aggregation for multi-tenant distributed training"};
  app.require_subcommand(1);
  app.set_config("--config", "",
                 "Read options from a TOML file: a [sim] table holds `atp sim` options by "
                 "their long names");
  atp::apps::add_demo_command(app);
  atp::apps::add_sim_command(app);
  atp::apps::add_daemon_commands(app);
  atp::apps::add_worker_command(app);
  atp::apps::add_ctl_command(app);
  atp::apps::add_check_command(app);
  atp::apps::add_cluster_command(app);
  atp::apps::add_trace_command(app);
  atp::apps::add_p4_command(app);
  atp::apps::add_controller_command(app);
  atp::apps::add_job_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // Bad values that only the engines can judge (a window that is not a power of two, ...).
    std::cerr << "atp: " << e.what() << "\n";
    return 2;
  }
  return atp::apps::exit_code();
}
