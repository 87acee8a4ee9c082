#pragma once
// `atp switch`: the switch pipeline on a UDP socket. Each datagram is processed in place and
// forwarded (unicast or one copy per multicast member) in batches.
#include <nlohmann/json.hpp>
#include <string>

#include "control/cluster_config.h"
#include "engines/switch/switch_pipeline.h"
#include "runtime/event_loop.h"
#include "runtime/udp_socket.h"

namespace atp::daemons {

class SwitchDaemon {
 public:
  SwitchDaemon(const control::ClusterConfig& config, const std::string& name);

  // Serves until `loop` stops.
  void attach(runtime::EventLoop& loop);
  nlohmann::json stats() const;
  const runtime::Endpoint& address() const { return address_; }
  const std::string& name() const { return name_; }

  // Control plane, no restart needed (see control_requests.h).
  std::vector<std::uint32_t> job_ids() const { return pipeline_.jobs(); }
  void admit(const control::ClusterConfig& cluster, std::uint32_t job);
  bool remove_job(std::uint32_t job) { return pipeline_.remove_job(job); }

 private:
  void on_readable();

  std::string name_;
  runtime::Endpoint address_;
  runtime::AddressBook book_;
  engines::SwitchPipeline pipeline_;
  runtime::UdpSocket socket_;
  runtime::ReceiveBatch received_{64, 65536};
  runtime::SendBatch to_send_;
};

}  // namespace atp::daemons
