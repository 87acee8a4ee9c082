// `atp trace replay FILE...`: runs switch traces through the C++ pipeline and reports, per file,
// either how many packets matched or the first packet whose outputs differ, field by field.
#include <fmt/format.h>

#include <iostream>

#include "apps/commands.h"
#include "conformance/switch_trace.h"

namespace atp::apps {

namespace {

bool replay_file(const std::string& path) {
  const conformance::Trace trace = conformance::read_trace_file(path);
  std::size_t packets = 0;
  for (const auto& event : trace.events) packets += event.index() == 2;
  if (const auto d = conformance::replay(trace)) {
    std::cout << fmt::format("{}: packet {} of {} differs: {}\n", path, d->packet, packets, d->what);
    return false;
  }
  std::cout << fmt::format("{}: {} packets, every output identical\n", path, packets);
  return true;
}

}  // namespace

void add_trace_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("trace", "Switch traces (docs/engines.md §2.10)");
  cmd->require_subcommand(1);
  auto* replay = cmd->add_subcommand(
      "replay", "Replay traces through the C++ switch pipeline and compare every packet out");
  static std::vector<std::string> files;
  replay->add_option("files", files, "Trace files (JSON Lines)")->required()->check(CLI::ExistingFile);
  replay->callback([] {
    bool all = true;
    for (const auto& f : files) all &= replay_file(f);
    set_exit_code(all ? 0 : 1);
  });
}

}  // namespace atp::apps
