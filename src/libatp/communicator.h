#pragma once
// libatp: what training code links. A Communicator is one worker of one job: it owns a UDP
// socket and an I/O thread running the worker engine, and sums float tensors over the job.
//
//   auto comm = atp::Communicator::from_cluster_file("cluster.toml", job, rank);
//   comm->allreduce(gradients, summed);                 // blocking
//   auto done = comm->allreduce_async(grads, summed);   // std::future<void>; .get() rethrows
//
// Buffers passed to allreduce_async must stay alive (and the input unchanged) until it ends.
// Input and output may be the same buffer: a fragment's input is reread (for resends) only
// until its own result is written.
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster_config.h"
#include "engines/worker/worker.h"
#include "runtime/event_loop.h"
#include "runtime/udp_socket.h"

namespace atp {

class Communicator {
 public:
  // `bind` is this worker's address; NodeIds in `config` resolve through `book`. `ranks`:
  // where every rank of the job sits (ClusterConfig::rank_positions), which reduce_scatter
  // needs; empty, it refuses.
  Communicator(engines::WorkerConfig config, runtime::Endpoint bind, runtime::AddressBook book,
               std::vector<proto::ResultOwner> ranks = {});
  // The same on a socket already bound to the worker's address.
  Communicator(engines::WorkerConfig config, runtime::UdpSocket socket, runtime::AddressBook book,
               std::vector<proto::ResultOwner> ranks = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // `run`: this launch of the job. By default the job's first PS hands every worker of a
  // launch the same fresh one at the first allreduce, once every worker asked (a random nonce
  // per Communicator tells launches apart). An explicit run must be the same for all the
  // job's workers, and the next launch on the same switches and PSs must use another.
  static std::unique_ptr<Communicator> from_cluster(const control::ClusterConfig& cluster,
                                                    std::uint32_t job, std::size_t rank,
                                                    std::optional<std::uint16_t> run = {});
  static std::unique_ptr<Communicator> from_cluster_file(const std::string& path,
                                                         std::uint32_t job, std::size_t rank,
                                                         std::optional<std::uint16_t> run = {});

  // Sums `input` over every worker of the job into `output` (same size). Throws
  // std::runtime_error if the job cannot finish (see WorkerConfig::deadline).
  void allreduce(std::span<const float> input, std::span<float> output);
  std::future<void> allreduce_async(std::span<const float> input, std::span<float> output);
  // `count` values of `precision` (float16 and bfloat16 quantized straight from the tensor and
  // the exact sum rounded once into `output`; quant/quantizer.h). The same lifetime rule.
  std::future<void> allreduce_async(quant::Precision precision, const void* input, void* output,
                                    std::size_t count);

  // Reduce-scatter: `input` holds one shard of `count` values per rank, in rank order; the sum
  // of this rank's shard over the job lands in `output` (`count` values), and only that shard's
  // sums come down to this host: the others' seqs answer it with a header each (protocol.md
  // §8.1). Every rank must call it alike. `output` may be this rank's shard of `input`.
  std::future<void> reduce_scatter_async(quant::Precision precision, const void* input,
                                         void* output, std::size_t count);

  engines::WorkerStats stats() const;
  // The run this worker's fragments name: the configured one, or the one PS 0 handed out
  // (nullopt until its answer came).
  std::optional<std::uint16_t> run() const;
  const engines::WorkerConfig& config() const { return config_; }

 private:
  struct Request {
    quant::Precision precision;
    const void* input;
    void* output;
    std::size_t count;
    bool scatter = false;  // reduce_scatter: `count` values per rank
    std::promise<void> done;
  };
  // A call on its way: done once its every tensor is (a reduce-scatter is one per rank).
  struct Call {
    std::promise<void> done;
    std::size_t tensors_left = 0;
  };
  std::future<void> enqueue(Request r);
  void submit(Time now, Request& r);
  void fail_pending(const std::string& reason);
  void on_wake();
  void on_readable();
  void on_timer();
  void after_engine();  // send, complete, re-arm

  engines::WorkerConfig config_;
  runtime::AddressBook book_;
  runtime::UdpSocket socket_;
  runtime::EventLoop loop_;
  int timer_ = -1;
  engines::Worker worker_;  // touched only by the I/O thread
  Outbox outbox_;
  runtime::ReceiveBatch received_{64, 65536};
  std::vector<engines::Arrival> arrivals_;  // received_'s datagrams as the worker takes them
  runtime::SendBatch to_send_;
  std::map<std::uint32_t, std::shared_ptr<Call>> pending_;  // by tensor id
  std::vector<proto::ResultOwner> ranks_;

  mutable std::mutex mutex_;  // guards queue_, stats_ and run_
  std::deque<Request> queue_;
  engines::WorkerStats stats_;
  std::optional<std::uint16_t> run_;
  std::thread io_;
};

}  // namespace atp
