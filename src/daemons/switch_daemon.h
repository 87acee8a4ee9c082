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
