#include "libatp/local_fabric.h"

#include <fmt/format.h>

#include <random>

#include "runtime/udp_socket.h"

namespace atp {

namespace {

// A loopback port nobody holds now. The daemons bind it a moment later; on loopback, where only
// this machine's processes take ports, losing that race is all but impossible, and it would
// fail loudly (bind error), never silently.
std::uint16_t free_loopback_port() {
  runtime::UdpSocket probe(runtime::Endpoint{0x7F000001, 0});
  return probe.local().port;
}

std::string fabric_and_job(const LocalJob& job) {
  std::string workers;
  for (const auto& w : job.workers)
    workers += fmt::format("{{ rack = \"local-rack\", address = \"{}\" }}, ", w.str());
  return fmt::format(
      "# A loopback fabric started by the process of rank 0 (libatp/local_fabric.h).\n"
      "[[switch]]\nname = \"local-rack\"\naddress = \"127.0.0.1:{}\"\naggregators = {}\n"
      "values_per_aggregator = {}\n\n[[ps]]\nname = \"local-ps\"\naddress = \"127.0.0.1:{}\"\n\n"
      "[[job]]\nid = {}\ntoken = {}\nwindow = {}\nvalues_per_packet = {}\nmax_gradient = {}\n"
      "deadline_ms = {}\nparameter_servers = [\"local-ps\"]\nworkers = [{}]\n",
      free_loopback_port(), job.aggregators, job.values_per_packet, free_loopback_port(),
      LocalFabric::kJob, std::random_device{}(), job.window, job.values_per_packet,
      job.max_gradient, job.deadline / kMillisecond, workers);
}

}  // namespace

LocalFabric::LocalFabric(const LocalJob& job) : text_(fabric_and_job(job)) {
  const auto cluster = control::ClusterConfig::parse(text_, "local fabric");
  switch_ = std::make_unique<daemons::SwitchDaemon>(cluster, "local-rack");
  ps_ = std::make_unique<daemons::PsDaemon>(cluster, "local-ps");
  switch_->attach(loop_);
  ps_->attach(loop_);
  loop_.on_wake([] {});
  thread_ = std::thread([this] { loop_.run(); });
}

LocalFabric::~LocalFabric() {
  loop_.stop();
  loop_.wake();
  thread_.join();
}

}  // namespace atp
