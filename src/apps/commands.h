#pragma once
// Each subcommand registers itself on the CLI11 app and runs from its callback.
#include <CLI/CLI.hpp>

namespace atp::apps {

void add_demo_command(CLI::App& app);
void add_sim_command(CLI::App& app);
void add_daemon_commands(CLI::App& app);
void add_worker_command(CLI::App& app);
void add_ctl_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_cluster_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_p4_command(CLI::App& app);
// `atp p4 agent`, under `atp p4` (daemon_commands.cpp).
void add_p4_agent_command(CLI::App& p4);
void add_controller_command(CLI::App& app);
void add_job_command(CLI::App& app);

// The exit code the subcommand that ran asked for.
int exit_code();
void set_exit_code(int code);

}  // namespace atp::apps
