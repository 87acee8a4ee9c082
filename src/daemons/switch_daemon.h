#pragma once
// `atp switch`: the switch pipeline on UDP sockets. Each datagram is processed in place and
// forwarded (unicast, or one copy per multicast member) in batches. With `threads = N` in the
// cluster file the switch runs N independent shards, one thread each, on ports port..port+N-1:
// each owns 1/N of the pool and the jobs dealt to it, so shards share nothing on the data path.
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster_config.h"
#include "control/slice_allocator.h"
#include "engines/switch/switch_pipeline.h"
#include "runtime/event_loop.h"
#include "runtime/udp_socket.h"

namespace atp::daemons {

class SwitchDaemon {
 public:
  SwitchDaemon(const control::ClusterConfig& config, const std::string& name);
  ~SwitchDaemon();

  // Starts serving: shard 0 on `loop` (the caller's thread), the others on their own threads,
  // which stop when this object is destroyed.
  void attach(runtime::EventLoop& loop);
  nlohmann::json stats() const;
  const runtime::Endpoint& address() const { return address_; }
  // Where shard 0 listens (the address with the port the kernel chose for port 0).
  runtime::Endpoint bound_address() const { return shards_[0]->socket.local(); }
  const std::string& name() const { return name_; }
  // The cluster file it was started from: the fabric the controller's jobs are read over.
  const control::ClusterConfig& fabric() const { return fabric_; }

  // Control plane, no restart needed (see control_requests.h). Thread-safe. Admitting never
  // changes a running job's entry: under the static policy the new job gets a free run of
  // aggregators of the size the file derives, or admit throws saying what is free.
  std::vector<std::uint32_t> job_ids() const;
  void admit(const control::ClusterConfig& cluster, std::uint32_t job);
  bool remove_job(std::uint32_t job);
  // The static slice job `job` holds, if any.
  std::optional<control::Slice> static_slice(std::uint32_t job) const;

 private:
  struct Shard {
    Shard(engines::SwitchConfig config, const runtime::Endpoint& address)
        : pipeline(config), slices(config.pool_size), socket(address) {}
    mutable std::mutex mutex;  // the data path holds it per batch; the control plane per call
    runtime::AddressBook book;
    engines::SwitchPipeline pipeline;
    control::SliceAllocator slices;  // static policy: who holds which part of the pool
    runtime::UdpSocket socket;
    runtime::ReceiveBatch received{64, 65536};
    runtime::SendBatch to_send;
    std::uint64_t ip_ce_received = 0;  // datagrams that arrived marked CE
    std::uint64_t packets_failed = 0;  // datagrams whose processing threw (dropped)
    // Multicast copies withheld from members that have not proved, for the job, that they
    // hold their address (SwitchPipeline::heard_members).
    std::uint64_t unheard_copies = 0;
    runtime::EventLoop own_loop;  // shards 1..N-1
    std::thread thread;
  };
  bool congested(const Shard& shard) const;
  void on_readable(Shard& shard);
  void forward(Shard& shard, const engines::Verdict& v, std::span<const std::uint8_t> packet);
  void install(Shard& shard, engines::SwitchJob job);
  Shard* shard_of_job(std::uint32_t job) const;
  void forget_unused_addresses(Shard& shard);

  control::ClusterConfig fabric_;
  std::string name_;
  runtime::Endpoint address_;
  std::uint32_t ecn_backlog_bytes_, ecn_receive_backlog_bytes_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace atp::daemons
