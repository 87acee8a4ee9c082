// `atp check`: validates a cluster file and shows what every party derives from it, including
// each job's wire token (what its packets must carry), so two hosts can compare their files.
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "apps/commands.h"
#include "control/cluster_config.h"

namespace atp::apps {

namespace {

nlohmann::json describe(const control::ClusterConfig& cluster) {
  nlohmann::json out;
  for (const auto& s : cluster.switches())
    out["switches"].push_back({{"name", s.name}, {"address", s.address.str()},
                               {"level", static_cast<int>(s.level)}, {"aggregators", s.aggregators},
                               {"threads", s.threads}, {"policy", engines::to_string(s.policy)}});
  for (const auto& ps : cluster.servers())
    out["parameter_servers"].push_back({{"name", ps.name}, {"address", ps.address.str()}});
  runtime::AddressBook book;
  for (const auto& job : cluster.jobs()) {
    const engines::WorkerConfig first = cluster.worker_config(job.id, 0, book);
    std::map<std::string, int> per_rack;
    for (const auto& w : job.workers) ++per_rack[w.rack];
    out["jobs"].push_back({{"id", job.id}, {"workers", job.workers.size()},
                           {"workers_per_rack", per_rack}, {"window", job.window},
                           {"values_per_packet", job.values_per_packet}, {"scale", first.scale},
                           {"parameter_servers", job.parameter_servers},
                           {"wire_token", fmt::format("{:#010x}", cluster.wire_token(job.id))}});
  }
  return out;
}

}  // namespace

void add_check_command(CLI::App& app) {
  static std::string config;
  static bool json = false;
  auto* check = app.add_subcommand(
      "check", "Validate a cluster file and show what each party derives from it");
  check->add_option("--config", config, "Cluster file (TOML)")->required()->check(CLI::ExistingFile);
  check->add_flag("--json", json, "Print JSON instead of a table");
  check->callback([] {
    // A bad file throws: main() prints the file and the reason and exits with 2.
    const auto cluster = control::ClusterConfig::load(config);
    const nlohmann::json d = describe(cluster);
    if (json) {
      std::cout << d.dump(2) << "\n";
      return;
    }
    std::cout << config << ": valid\n";
    for (const auto& s : d.value("switches", nlohmann::json::array()))
      std::cout << fmt::format("switch {:<10} {:<21} level {}  {} aggregators  {} thread(s)  {}\n",
                               s["name"].get<std::string>(), s["address"].get<std::string>(),
                               s["level"].get<int>(), s["aggregators"].get<unsigned>(),
                               s["threads"].get<unsigned>(), s["policy"].get<std::string>());
    for (const auto& j : d.value("jobs", nlohmann::json::array()))
      std::cout << fmt::format("job {:<6} {} workers  window {}  K {}  scale {}  token {}\n",
                               j["id"].get<std::uint32_t>(), j["workers"].get<std::size_t>(),
                               j["window"].get<std::uint32_t>(), j["values_per_packet"].get<int>(),
                               j["scale"].get<double>(), j["wire_token"].get<std::string>());
  });
}

}  // namespace atp::apps
