#pragma once
// Turns a simulated cluster's report into a table for people or JSON for programs.
#include <nlohmann/json.hpp>
#include <string>

#include "sim/cluster.h"

namespace atp::apps {

struct RunInfo {
  double wall_seconds = 0;
  std::string reproduce;  // the command line that gives the same run
  nlohmann::json scenario;  // a drawn scenario's terms (atp sim --scenario-seed), or null
};

nlohmann::json to_json(const sim::ClusterReport& report, const RunInfo& info);
std::string to_table(const sim::ClusterReport& report, const RunInfo& info);

}  // namespace atp::apps
