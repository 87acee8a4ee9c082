// `atp p4 config`: the P4 programs' table entries and multicast groups for one switch, from the
// cluster file (what the software switch of that name would install) or from a switch trace
// (what the conformance harness replays), for BMv2 (simple_switch_CLI commands).
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "conformance/switch_trace.h"
#include "control/cluster_config.h"
#include "control/p4_entries.h"

namespace atp::apps {

namespace {

struct P4ConfigOptions {
  std::string config, switch_name, trace, target = "bmv2";
};

// Every entry of a switch of the cluster file, for a fresh BMv2.
void print_cluster_entries(const P4ConfigOptions& o) {
  const auto cluster = control::ClusterConfig::load(o.config);
  for (const auto& line : control::bmv2_switch(cluster, o.switch_name)) std::cout << line << "\n";
}

// JSON for the harness: the profile, for each trace event that adds a job (by its index among
// the trace's events) that job's commands (node handles are left to the harness), and each
// packet's claim epoch.
void print_trace_entries(const P4ConfigOptions& o) {
  const conformance::Trace trace = conformance::read_trace_file(o.trace);
  nlohmann::json out;
  out["profile"] = control::bmv2_profile(trace.setup);
  nlohmann::json jobs = nlohmann::json::object();
  for (std::size_t i = 0; i < trace.events.size(); ++i)
    if (const auto* job = std::get_if<engines::SwitchJob>(&trace.events[i]))
      jobs[std::to_string(i)] = control::bmv2_job(*job, 0);
  out["jobs"] = jobs;
  // The claim epoch the control plane has written when each packet arrives.
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& event : trace.events)
    if (const auto* packet = std::get_if<conformance::PacketRecord>(&event))
      epochs.push_back(engines::claim_clock(packet->time, trace.setup.stale_after).epoch);
  out["claim_epochs"] = epochs;
  std::cout << out.dump() << "\n";
}

}  // namespace

void add_p4_command(CLI::App& app) {
  auto* p4 = app.add_subcommand("p4", "The P4 programs' control plane (docs/p4.md)");
  p4->require_subcommand(1);
  auto* cmd = p4->add_subcommand(
      "config", "Print one switch's table entries and multicast groups for a P4 target");
  static P4ConfigOptions o;
  auto* config = cmd->add_option("--config", o.config, "Cluster file")->check(CLI::ExistingFile);
  cmd->add_option("--switch", o.switch_name, "The switch's name in the cluster file")
      ->needs(config);
  auto* trace = cmd->add_option("--trace", o.trace,
                                "A switch trace instead: JSON with its profile and each added "
                                "job's commands (what the conformance harness replays)")
                    ->check(CLI::ExistingFile)
                    ->excludes(config);
  cmd->add_option("--target", o.target, "bmv2 (simple_switch_CLI commands)")
      ->check(CLI::IsMember({"bmv2"}))
      ->capture_default_str();
  cmd->callback([config, trace] {
    if (*trace) return print_trace_entries(o);
    if (!*config || o.switch_name.empty())
      throw CLI::ValidationError("p4 config", "give --config and --switch, or --trace");
    print_cluster_entries(o);
  });
}

}  // namespace atp::apps
