// The cluster file parser on arbitrary text. A file is either refused with
// std::invalid_argument (the one error every program reports as "bad configuration"), or
// accepted, and then everything derived from it must be accepted by the engines: every
// switch's pipeline and jobs, every PS's jobs, every worker's configuration.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "control/cluster_config.h"
#include "engines/ps/parameter_server.h"
#include "engines/switch/switch_pipeline.h"
#include "engines/worker/worker.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace atp;
  const std::string text(reinterpret_cast<const char*>(data), size);
  control::ClusterConfig cluster;
  try {
    cluster = control::ClusterConfig::parse(text, "fuzz");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  runtime::AddressBook book;
  for (const auto& s : cluster.switches()) {
    engines::SwitchPipeline pipeline(cluster.switch_config(s.name));
    for (auto& job : cluster.switch_jobs(s.name, book)) pipeline.add_job(job);
    for (const auto& job : cluster.jobs()) {
      if (cluster.thread_of(s.name, job.id) >= s.threads) std::abort();
      (void)cluster.address_for(s.name, job.id);
    }
  }
  for (const auto& ps : cluster.servers()) {
    engines::ParameterServer server;
    for (auto& job : cluster.server_jobs(ps.name, book)) server.add_job(job);
  }
  for (const auto& job : cluster.jobs())
    for (std::size_t rank = 0; rank < job.workers.size(); ++rank)
      engines::validate(cluster.worker_config(job.id, rank, book));
  return 0;
}
