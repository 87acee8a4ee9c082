#pragma once
// The "atp" torch.distributed backend: a c10d ProcessGroup whose SUM and AVG reductions of
// float32, float16 and bfloat16 tensors (allreduce, allreduce_coalesced, reduce_scatter,
// _reduce_scatter_base) run over ATP (libatp's Communicator), and whose every other collective,
// dtype and op goes to a Gloo process group built from the same store. It lives in C++ because a
// Python ProcessGroup's Work objects (torch 1.13) lose their errors and die with their Python
// reference, which DDP does not keep.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "libatp/job_rendezvous.h"

namespace atp::torch_backend {

class ProcessGroupATP : public c10d::ProcessGroup {
 public:
  // Joins the job through `store` (libatp/job_rendezvous.h); throws with the reason.
  ProcessGroupATP(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                  c10::intrusive_ptr<c10d::ProcessGroup> gloo, const RendezvousSettings& settings);
  ~ProcessGroupATP() override;

  const std::string getBackendName() const override { return "atp"; }
  std::uint32_t job() const { return rendezvous_->job(); }
  // What destroy_process_group() calls: waits for in-flight allreduces, then leaves the job
  // (rank 0 removes it). Later ATP calls fail; Gloo's still work.
  void shutdown();
  // Allreduces this group sent through ATP, and through Gloo.
  std::uint64_t atp_allreduces() const { return atp_calls_; }
  // This rank's worker engine's counters (results, done copies, resends, ...); after
  // shutdown, as they were when the group left the job.
  engines::WorkerStats worker_stats() const;
  std::uint64_t gloo_allreduces() const { return gloo_calls_; }
  // Per call kind and dtype ("allreduce float16", ...): calls and tensor bytes through ATP and
  // through Gloo, for the reductions ATP can carry.
  struct Traffic {
    std::uint64_t atp_calls = 0, atp_bytes = 0, gloo_calls = 0, gloo_bytes = 0;
  };
  std::map<std::string, Traffic> traffic() const;

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out,
                                                std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& o) override;

  // Everything else: Gloo.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out,
                                           std::vector<at::Tensor>& in, const c10d::AllgatherOptions& o) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out,
                                                     std::vector<at::Tensor>& in,
                                                     const c10d::AllgatherOptions& o) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out,
                                        std::vector<at::Tensor>& in, const c10d::GatherOptions& o) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out,
                                         std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& o) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions& o) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override;
  void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

 private:
  // One ATP sum of a call: `staged`, the contiguous host tensor ATP sums in place (a float32
  // copy, or the caller's tensor where it lies), and `deliver`, which writes the sum (divided by
  // the group's size for AVG) where the call wants it.
  struct Part {
    at::Tensor staged;
    std::function<void(const at::Tensor& sum)> deliver;
    // A reduce-scatter's: `staged` holds this many values per rank, and only this rank's shard
    // (at rank * shard) is summed into it; the other shards' sums never come to this host.
    // 0: an allreduce of the whole of `staged`.
    std::int64_t shard = 0;
    // Where a reduce-scatter writes this rank's shard of the sum, when not into `staged`: the
    // caller's output, summed straight from its input (which `staged` then is, read only).
    at::Tensor shard_out;
    // Where rank `rank`'s sum lands: the whole of `staged`, its shard of it, or `shard_out`.
    at::Tensor sum_of(int rank) const {
      if (shard_out.defined()) return shard_out;
      return shard > 0 ? staged.narrow(0, rank * shard, shard) : staged;
    }
  };
  // One ATP sum on its way: completed, in submission order, by the completer thread, so the
  // Communicator's I/O thread never runs DDP's callbacks.
  struct InFlight {
    std::future<void> done;
    Part part;
    bool average = false;
    // The call's first error, shared by its parts (they complete in order: its last one
    // completes the call's future, which only it holds).
    std::shared_ptr<std::exception_ptr> error;
    std::vector<at::Tensor> outputs;                 // what the call's Work results in
    c10::intrusive_ptr<c10::ivalue::Future> future;  // the call's last part only
  };
  // Sums each part over the job through ATP, all in flight at once; the Work completes when the
  // last one has been delivered.
  c10::intrusive_ptr<c10d::Work> submit(std::vector<Part> parts, bool average,
                                        std::vector<at::Tensor> outputs, c10d::OpType kind);
  // Counts a reduction call and, for one ATP could not carry, says so once per kind and dtype.
  void count(const char* kind, const std::vector<at::Tensor>& tensors, bool through_atp);
  void complete_in_order();
  void finish(InFlight& f);

  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<RendezvousStore> store_adapter_;
  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  std::unique_ptr<JobRendezvous> rendezvous_;
  // Guards the Communicator's lifetime for worker_stats(): shutdown() closes it.
  mutable std::mutex stats_mutex_;
  bool closed_ = false;
  engines::WorkerStats final_stats_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<InFlight> in_flight_;
  bool stopping_ = false;
  std::thread completer_;
  std::atomic<std::uint64_t> atp_calls_{0}, gloo_calls_{0};
  mutable std::mutex traffic_mutex_;
  std::map<std::string, Traffic> traffic_;
};

}  // namespace atp::torch_backend
