#include "process_group_atp.h"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <iostream>
#include <optional>

namespace atp::torch_backend {

namespace {

// The c10d Work of one ATP allreduce: a view of its future, which DDP chains callbacks on.
class AtpWork : public c10d::Work {
 public:
  AtpWork(int rank, std::vector<at::Tensor> tensors, c10::intrusive_ptr<c10::ivalue::Future> future)
      : Work(rank, c10d::OpType::ALLREDUCE), tensors_(std::move(tensors)), future_(std::move(future)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override { return future_->exception_ptr(); }
  std::vector<at::Tensor> result() override { return tensors_; }
  void synchronize() override {}
  // ATP's own deadline (the job's deadline_ms) bounds the wait; `timeout` is not used.
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> tensors_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class C10dStore : public RendezvousStore {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key) override {
    const auto bytes = store_->get(key);
    return {bytes.begin(), bytes.end()};
  }
  void remove(const std::string& key) override {
    try {
      store_->deleteKey(key);
    } catch (const std::exception&) {
      // A store that cannot delete (or a key already gone) leaves nothing to do.
    }
  }
  bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    try {
      store_->wait(keys, timeout);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

ProcessGroupATP::ProcessGroupATP(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                 c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                                 const RendezvousSettings& settings)
    : ProcessGroup(rank, size), store_(store), store_adapter_(std::make_unique<C10dStore>(store)),
      gloo_(std::move(gloo)),
      rendezvous_(std::make_unique<JobRendezvous>(*store_adapter_, rank, size, settings)) {
  completer_ = std::thread([this] { complete_in_order(); });
}

ProcessGroupATP::~ProcessGroupATP() {
  // Python frees the group holding the GIL. Gloo's destructor joins its threads, and one of them
  // may be freeing a tensor that needs the GIL (torch 1.13): without letting go, both wait for
  // ever. Leaving the job may wait for the other ranks too.
  std::optional<pybind11::gil_scoped_release> released;
  if (Py_IsInitialized() && PyGILState_Check()) released.emplace();
  try {
    shutdown();
  } catch (const std::exception& e) {
    std::cerr << "ATP: shutting the process group down: " << e.what() << "\n";
  }
  rendezvous_.reset();
  gloo_.reset();
}

void ProcessGroupATP::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  completer_.join();
  rendezvous_->close();
}

// float32 SUM and AVG of one dense tensor; the rest is Gloo's.
bool ProcessGroupATP::goes_through_atp(const std::vector<at::Tensor>& tensors,
                                       const c10d::AllreduceOptions& opts) {
  if (tensors.size() != 1) return false;
  const at::Tensor& t = tensors[0];
  const auto op = opts.reduceOp.op_;
  return t.scalar_type() == at::kFloat && t.layout() == at::kStrided && t.numel() > 0 &&
         (t.is_cpu() || t.is_cuda()) &&
         (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  if (!goes_through_atp(tensors, opts)) {
    ++gloo_calls_;
    return gloo_->allreduce(tensors, opts);
  }
  InFlight f;
  f.tensor = tensors[0];
  f.average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  // ATP sums host memory in place: a GPU tensor through pinned host memory, a strided one
  // through a contiguous copy; both are copied back when the sum is in.
  if (f.tensor.is_cuda()) {
    f.staged = at::empty(f.tensor.sizes(), f.tensor.options().device(at::kCPU).pinned_memory(true));
    f.staged.copy_(f.tensor);
  } else {
    f.staged = f.tensor.is_contiguous() ? f.tensor : f.tensor.contiguous();
  }
  f.future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  auto work = c10::make_intrusive<AtpWork>(rank_, tensors, f.future);
  float* data = f.staged.data_ptr<float>();
  const std::span<float> values(data, static_cast<std::size_t>(f.staged.numel()));
  {
    std::lock_guard lock(mutex_);
    TORCH_CHECK(!stopping_, "ATP process group of job ", job(), " was shut down");
    f.done = rendezvous_->communicator().allreduce_async(values, values);
    in_flight_.push_back(std::move(f));
  }
  changed_.notify_one();
  ++atp_calls_;
  return work;
}

void ProcessGroupATP::complete_in_order() {
  for (;;) {
    InFlight f;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !in_flight_.empty(); });
      if (in_flight_.empty()) return;  // stopping, and nothing left to finish
      f = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    finish(f);
  }
}

void ProcessGroupATP::finish(InFlight& f) {
  try {
    try {
      f.done.get();
    } catch (const std::exception& e) {
      throw std::runtime_error("ATP allreduce of job " + std::to_string(job()) + " failed: " + e.what());
    }
    if (f.average) f.staged.div_(size_);
    if (!f.staged.is_same(f.tensor)) f.tensor.copy_(f.staged);
    f.future->markCompleted(c10::IValue(std::vector<at::Tensor>{f.tensor}));
  } catch (...) {
    f.future->setError(std::current_exception());
  }
}

// Gloo's collectives, as they are.
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::broadcast(std::vector<at::Tensor>& t,
                                                          const c10d::BroadcastOptions& o) {
  return gloo_->broadcast(t, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allreduce_coalesced(
    std::vector<at::Tensor>& t, const c10d::AllreduceCoalescedOptions& o) {
  return gloo_->allreduce_coalesced(t, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::reduce(std::vector<at::Tensor>& t,
                                                       const c10d::ReduceOptions& o) {
  return gloo_->reduce(t, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allgather(std::vector<std::vector<at::Tensor>>& out,
                                                          std::vector<at::Tensor>& in,
                                                          const c10d::AllgatherOptions& o) {
  return gloo_->allgather(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::_allgather_base(at::Tensor& out, at::Tensor& in,
                                                                const c10d::AllgatherOptions& o) {
  return gloo_->_allgather_base(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
    const c10d::AllgatherOptions& o) {
  return gloo_->allgather_coalesced(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::gather(std::vector<std::vector<at::Tensor>>& out,
                                                       std::vector<at::Tensor>& in,
                                                       const c10d::GatherOptions& o) {
  return gloo_->gather(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::scatter(std::vector<at::Tensor>& out,
                                                        std::vector<std::vector<at::Tensor>>& in,
                                                        const c10d::ScatterOptions& o) {
  return gloo_->scatter(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::reduce_scatter(
    std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
    const c10d::ReduceScatterOptions& o) {
  return gloo_->reduce_scatter(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::_reduce_scatter_base(
    at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) {
  return gloo_->_reduce_scatter_base(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::alltoall_base(at::Tensor& out, at::Tensor& in,
                                                              std::vector<int64_t>& out_splits,
                                                              std::vector<int64_t>& in_splits,
                                                              const c10d::AllToAllOptions& o) {
  return gloo_->alltoall_base(out, in, out_splits, in_splits, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::alltoall(std::vector<at::Tensor>& out,
                                                         std::vector<at::Tensor>& in,
                                                         const c10d::AllToAllOptions& o) {
  return gloo_->alltoall(out, in, o);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::send(std::vector<at::Tensor>& t, int dst, int tag) {
  return gloo_->send(t, dst, tag);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::recv(std::vector<at::Tensor>& t, int src, int tag) {
  return gloo_->recv(t, src, tag);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::recvAnysource(std::vector<at::Tensor>& t, int tag) {
  return gloo_->recvAnysource(t, tag);
}
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::barrier(const c10d::BarrierOptions& o) {
  return gloo_->barrier(o);
}
void ProcessGroupATP::monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) {
  gloo_->monitoredBarrier(o, wait_all_ranks);
}
void ProcessGroupATP::setSequenceNumberForGroup() { gloo_->setSequenceNumberForGroup(); }
uint64_t ProcessGroupATP::getSequenceNumberForGroup() { return gloo_->getSequenceNumberForGroup(); }

}  // namespace atp::torch_backend
