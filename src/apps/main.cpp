// `atp`: one program, one subcommand per part of the system.
#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>

#include "apps/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ATP: in-network gradient aggregation for multi-tenant distributed training"};
  app.require_subcommand(1);
  atp::apps::add_demo_command(app);
  atp::apps::add_sim_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return atp::apps::exit_code();
}
