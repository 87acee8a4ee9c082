#pragma once
// `atp ps`: the parameter server engine on a UDP socket, answering in batches.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "control/cluster_config.h"
#include "control/slice_allocator.h"
#include "engines/ps/parameter_server.h"
#include "runtime/event_loop.h"
#include "runtime/udp_socket.h"

namespace atp::daemons {

class PsDaemon {
 public:
  PsDaemon(const control::ClusterConfig& config, const std::string& name);

  void attach(runtime::EventLoop& loop);
  nlohmann::json stats() const;
  const runtime::Endpoint& address() const { return address_; }
  const std::string& name() const { return name_; }
  // The cluster file it was started from: the fabric the controller's jobs are read over.
  const control::ClusterConfig& fabric() const { return fabric_; }

  // Control plane, no restart needed (see control_requests.h).
  std::vector<std::uint32_t> job_ids() const { return jobs_; }
  void admit(const control::ClusterConfig& cluster, std::uint32_t job);
  bool remove_job(std::uint32_t job);
  // Plans the job's seqs on `home` from now on (its PS engine's set_home); throws
  // std::invalid_argument for a job it does not hold, one that plans no home or borrows, or a
  // home outside the job's pool.
  void set_home(std::uint32_t job, const control::Slice& home);

 private:
  void add_job(engines::PsJob job);
  void on_readable();
  std::string budget_state() const;  // what the budget holds, for a refusal's message

  control::ClusterConfig fabric_;
  std::string name_;
  runtime::Endpoint address_;
  runtime::AddressBook book_;
  engines::ParameterServer ps_;
  std::vector<std::uint32_t> jobs_;
  runtime::UdpSocket socket_;
  runtime::ReceiveBatch received_{64, 65536};
  runtime::SendBatch to_send_;
  Outbox outbox_;
  std::uint64_t packets_failed_ = 0;  // datagrams whose processing threw (dropped)
  std::uint64_t memory_budget_ = 0;   // bytes (the [[ps]]'s memory_budget_mb)
  std::map<std::uint32_t, std::uint64_t> memory_held_;  // per job: ParameterServer::memory_bound
};

}  // namespace atp::daemons
