#include "process_group_atp.h"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <iostream>
#include <optional>

namespace atp::torch_backend {

namespace {

// The c10d Work of one ATP sum: a view of its future, which DDP chains callbacks on.
class AtpWork : public c10d::Work {
 public:
  AtpWork(int rank, std::vector<at::Tensor> tensors, c10::intrusive_ptr<c10::ivalue::Future> future,
          c10d::OpType kind)
      : Work(rank, kind), tensors_(std::move(tensors)), future_(std::move(future)) {}

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
  {
    std::lock_guard lock(stats_mutex_);
    final_stats_ = rendezvous_->communicator().stats();
    closed_ = true;
  }
  rendezvous_->close();
}

engines::WorkerStats ProcessGroupATP::worker_stats() const {
  std::lock_guard lock(stats_mutex_);
  return closed_ ? final_stats_ : rendezvous_->communicator().stats();
}

namespace {

// What ATP reduces: SUM and AVG of dense float32, float16 and bfloat16 tensors, on the CPU or a
// GPU. Half precision is quantized to the same int32 on the wire as its float32 copy would be,
// and the exact sum rounded once to the tensor's dtype.
bool atp_carries(const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::SUM && op.op_ != c10d::ReduceOp::AVG) return false;
  std::int64_t values = 0;
  for (const at::Tensor& t : tensors) {
    const auto dtype = t.scalar_type();
    if ((dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16) ||
        t.layout() != at::kStrided || !(t.is_cpu() || t.is_cuda()))
      return false;
    values += t.numel();
  }
  return values > 0;
}

// `tensors` laid end to end in a float32 host tensor (pinned when one is on a GPU, for the
// copies back): what ATP sums when it cannot sum a tensor where it lies.
at::Tensor float32_copy(const std::vector<at::Tensor>& tensors) {
  bool cuda = false;
  std::int64_t total = 0;
  for (const at::Tensor& t : tensors) {
    cuda |= t.is_cuda();
    total += t.numel();
  }
  at::Tensor out = at::empty({total}, at::TensorOptions().dtype(at::kFloat).pinned_memory(cuda));
  std::int64_t at = 0;
  for (const at::Tensor& t : tensors) {
    out.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
    at += t.numel();
  }
  return out;
}

// Whether ATP sums `t` where it lies: a contiguous CPU tensor of float32, or of half precision
// for a SUM (quantized straight from its 16-bit values; an AVG divides the float32 sum first, so
// that it is rounded to half precision once).
bool summed_where_it_lies(const at::Tensor& t, bool average) {
  const bool half = t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
  return t.is_cpu() && t.is_contiguous() && (t.scalar_type() == at::kFloat || (half && !average));
}

// The tensor ATP sums for an allreduce of `t`: `t` itself where it can, else a float32 copy.
at::Tensor summed_in_place_or_copied(const at::Tensor& t, bool average) {
  return summed_where_it_lies(t, average) ? t : float32_copy({t});
}

atp::quant::Precision precision_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf: return atp::quant::Precision::float16;
    case at::kBFloat16: return atp::quant::Precision::bfloat16;
    default: return atp::quant::Precision::float32;  // copies are float32
  }
}

// `sum`'s values from `offset` on, written into `t` in its dtype and device.
void write_part(const at::Tensor& sum, std::int64_t offset, at::Tensor& t) {
  if (!sum.is_same(t)) t.copy_(sum.narrow(0, offset, t.numel()).view(t.sizes()));
}

}  // namespace

void ProcessGroupATP::count(const char* kind, const std::vector<at::Tensor>& tensors, bool through_atp) {
  const std::string dtype = tensors.empty() ? "none" : std::string(c10::toString(tensors.front().scalar_type()));
  const std::string key = std::string(kind) + " " + dtype;
  std::uint64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += t.numel() * t.element_size();
  bool first_fallback = false;
  {
    std::lock_guard lock(traffic_mutex_);
    Traffic& t = traffic_[key];
    first_fallback = !through_atp && t.gloo_calls == 0;
    (through_atp ? t.atp_calls : t.gloo_calls) += 1;
    (through_atp ? t.atp_bytes : t.gloo_bytes) += bytes;
  }
  if (first_fallback)
    TORCH_WARN("ATP: ", kind, " of ", dtype, " with this op goes through Gloo, not the network "
               "(ATP reduces SUM and AVG of float32, float16 and bfloat16 tensors; this warning "
               "is given once per call kind and dtype)");
}

std::map<std::string, ProcessGroupATP::Traffic> ProcessGroupATP::traffic() const {
  std::lock_guard lock(traffic_mutex_);
  return traffic_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupATP::submit(std::vector<Part> parts, bool average,
                                                       std::vector<at::Tensor> outputs,
                                                       c10d::OpType kind) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  auto work = c10::make_intrusive<AtpWork>(rank_, outputs, future, kind);
  auto error = std::make_shared<std::exception_ptr>();
  {
    std::lock_guard lock(mutex_);
    TORCH_CHECK(!stopping_, "ATP process group of job ", job(), " was shut down");
    for (std::size_t i = 0; i < parts.size(); ++i) {
      InFlight f;
      f.part = std::move(parts[i]);
      f.average = average;
      f.error = error;
      if (i + 1 == parts.size()) {
        f.outputs = std::move(outputs);
        f.future = future;
      }
      at::Tensor& values = f.part.staged;
      auto& communicator = rendezvous_->communicator();
      if (f.part.shard > 0) {
        f.done = communicator.reduce_scatter_async(precision_of(values), values.data_ptr(),
                                                   f.part.sum_of(rank_).data_ptr(),
                                                   static_cast<std::size_t>(f.part.shard));
      } else {
        f.done = communicator.allreduce_async(precision_of(values), values.data_ptr(),
                                              values.data_ptr(),
                                              static_cast<std::size_t>(values.numel()));
      }
      in_flight_.push_back(std::move(f));
    }
  }
  changed_.notify_one();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  // One tensor per call (several are one per GPU of this process: Gloo's).
  const bool through_atp = tensors.size() == 1 && atp_carries(tensors, opts.reduceOp);
  count("allreduce", tensors, through_atp);
  if (!through_atp) {
    ++gloo_calls_;
    return gloo_->allreduce(tensors, opts);
  }
  ++atp_calls_;
  at::Tensor t = tensors[0];
  const bool average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
  return submit({{summed_in_place_or_copied(t, average),
                  [t](const at::Tensor& sum) mutable { write_part(sum, 0, t); }}},
                average, tensors, c10d::OpType::ALLREDUCE);
}

// Each tensor its own ATP sum, all in flight at once: a tensor is summed where it lies,
// where one sum of the tensors laid end to end copied them there and back (16 tensors of 64 Ki
// floats: 0.86 of its time, 64 of 4 Ki: the same; bench/coalesced_bench.py, docs/pytorch.md).
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& o) {
  const bool through_atp = !tensors.empty() && atp_carries(tensors, o.reduceOp);
  count("allreduce_coalesced", tensors, through_atp);
  if (!through_atp) return gloo_->allreduce_coalesced(tensors, o);
  const bool average = o.reduceOp.op_ == c10d::ReduceOp::AVG;
  std::vector<Part> parts;
  for (const at::Tensor& tensor : tensors) {
    if (tensor.numel() == 0) continue;
    at::Tensor t = tensor;
    parts.push_back(
        {summed_in_place_or_copied(t, average), [t](const at::Tensor& sum) mutable { write_part(sum, 0, t); }});
  }
  return submit(std::move(parts), average, tensors, c10d::OpType::ALLREDUCE_COALESCED);
}

// The whole input summed in the network, and only this rank's shard's sums sent down to it
// (Communicator::reduce_scatter_async; docs/protocol.md §8.1).
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::reduce_scatter(
    std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
    const c10d::ReduceScatterOptions& o) {
  bool shaped = out.size() == 1 && in.size() == 1 && in[0].size() == static_cast<std::size_t>(size_);
  for (std::size_t r = 0; shaped && r < in[0].size(); ++r) shaped = in[0][r].numel() == out[0].numel();
  const bool through_atp = shaped && atp_carries(in[0], o.reduceOp) && atp_carries(out, o.reduceOp);
  count("reduce_scatter", shaped ? in[0] : out, through_atp);
  if (!through_atp) return gloo_->reduce_scatter(out, in, o);
  at::Tensor mine = out[0];
  const std::int64_t offset = rank_ * mine.numel();
  return submit({{float32_copy(in[0]),
                 [mine, offset](const at::Tensor& sum) mutable { write_part(sum, offset, mine); },
                 mine.numel()}},
                o.reduceOp.op_ == c10d::ReduceOp::AVG, out, c10d::OpType::REDUCE_SCATTER);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupATP::_reduce_scatter_base(
    at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) {
  const bool through_atp = in.numel() == out.numel() * size_ && atp_carries({in, out}, o.reduceOp);
  count("_reduce_scatter_base", {in}, through_atp);
  if (!through_atp) return gloo_->_reduce_scatter_base(out, in, o);
  const bool average = o.reduceOp.op_ == c10d::ReduceOp::AVG;
  // Where both lie as ATP sums them (contiguous on the CPU, the same dtype that it carries in
  // place), the input is read and this rank's shard written straight into `out`: no copy.
  if (in.scalar_type() == out.scalar_type() && summed_where_it_lies(in, average) &&
      summed_where_it_lies(out, average))
    return submit({{in, [](const at::Tensor&) {}, out.numel(), out}}, average, {out},
                  c10d::OpType::_REDUCE_SCATTER_BASE);
  at::Tensor mine = out;
  const std::int64_t offset = rank_ * out.numel();
  return submit({{float32_copy({in}),
                 [mine, offset](const at::Tensor& sum) mutable { write_part(sum, offset, mine); },
                 mine.numel()}},
                average, {out}, c10d::OpType::_REDUCE_SCATTER_BASE);
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
  std::exception_ptr& error = *f.error;
  if (!error) {
    try {
      try {
        f.done.get();
      } catch (const std::exception& e) {
        throw std::runtime_error("ATP allreduce of job " + std::to_string(job()) + " failed: " + e.what());
      }
      if (f.average) f.part.sum_of(rank_).div_(size_);
      f.part.deliver(f.part.staged);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!f.future) return;  // not the call's last part
  if (error) f.future->setError(error);
  else f.future->markCompleted(c10::IValue(f.outputs));
}

// Gloo's collectives, as they are.
c10::intrusive_ptr<c10d::Work> ProcessGroupATP::broadcast(std::vector<at::Tensor>& t,
                                                          const c10d::BroadcastOptions& o) {
  return gloo_->broadcast(t, o);
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
