// `atp p4 config`: the P4 programs' table entries and multicast groups for one switch, from the
// cluster file (what the software switch of that name would install) or from a switch trace
// (what the conformance harness replays), for BMv2 (simple_switch_CLI commands) or Tofino (a
// bfrt_python script). With --job, one job's entries: what admitting it at run time adds, or,
// with --remove (Tofino), what removing it deletes.
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
  std::string config, switch_name, trace, target = "bmv2", program = "atp";
  std::uint32_t job = 0;
  unsigned first_node = 0;
  bool remove = false;
};

// The entries of a switch of the cluster file (all, or one job's), for the target.
void print_cluster_entries(const P4ConfigOptions& o, bool one_job) {
  const auto cluster = control::ClusterConfig::load(o.config);
  const auto limits =
      o.target == "tofino" ? control::P4Limits::tofino() : control::P4Limits::bmv2();
  const control::P4Entries entries =
      one_job ? control::p4_switch_job(cluster, o.switch_name, o.job, limits)
              : control::p4_switch(cluster, o.switch_name, limits);
  if (o.target == "tofino") {
    std::cout << control::bfrt_python_script(entries, o.program, o.remove);
    return;
  }
  for (const auto& line : control::bmv2_commands(entries, o.first_node)) std::cout << line << "\n";
}

// JSON for the harness: the profile, for each trace event that adds a job (by its index among
// the trace's events) that job's commands (node handles are left to the harness), and each
// packet's claim epoch.
void print_trace_entries(const P4ConfigOptions& o) {
  const conformance::Trace trace = conformance::read_trace_file(o.trace);
  nlohmann::json out;
  out["profile"] = control::bmv2_commands(control::p4_profile(trace.setup));
  nlohmann::json jobs = nlohmann::json::object();
  for (std::size_t i = 0; i < trace.events.size(); ++i)
    if (const auto* job = std::get_if<engines::SwitchJob>(&trace.events[i]))
      jobs[std::to_string(i)] = control::bmv2_commands(control::p4_job(*job));
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
  add_p4_agent_command(*p4);
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
  cmd->add_option("--target", o.target,
                  "bmv2 (simple_switch_CLI commands) or tofino (a bfrt_python script for "
                  "p4/tna/atp.p4)")
      ->check(CLI::IsMember({"bmv2", "tofino"}))
      ->capture_default_str();
  auto* job = cmd->add_option("--job", o.job,
                              "Only this job's entries: what admitting it at run time adds")
                  ->needs(config);
  auto* remove = cmd->add_flag("--remove", o.remove,
                               "With --job and --target tofino: delete the job's entries instead "
                               "(BMv2 deletes by entry handle: python/atp/bmv2.py keeps them)")
                     ->needs(job);
  cmd->add_option("--first-node", o.first_node,
                  "BMv2: the multicast node handle the switch will give this output's first "
                  "group (0 on a fresh switch)")
      ->capture_default_str();
  cmd->add_option("--program", o.program, "Tofino: the program's name under bfrt")
      ->capture_default_str();
  cmd->callback([config, trace, job, remove] {
    if (*trace) return print_trace_entries(o);
    if (!*config || o.switch_name.empty())
      throw CLI::ValidationError("p4 config", "give --config and --switch, or --trace");
    if (*remove && o.target != "tofino")
      throw CLI::ValidationError("p4 config", "--remove writes bfrt_python: use --target tofino");
    print_cluster_entries(o, static_cast<bool>(*job));
  });
}

}  // namespace atp::apps
