#include "libatp/communicator.h"

#include <random>
#include <stdexcept>

namespace atp {

Communicator::Communicator(engines::WorkerConfig config, runtime::Endpoint bind,
                           runtime::AddressBook book, std::vector<proto::ResultOwner> ranks)
    : Communicator(config, runtime::UdpSocket(bind), std::move(book), std::move(ranks)) {}

Communicator::Communicator(engines::WorkerConfig config, runtime::UdpSocket socket,
                           runtime::AddressBook book, std::vector<proto::ResultOwner> ranks)
    : config_(config), book_(std::move(book)), socket_(std::move(socket)), worker_(config),
      ranks_(std::move(ranks)), run_(worker_.run()) {
  loop_.watch(socket_.fd(), [this] { on_readable(); });
  timer_ = loop_.add_timer([this] { on_timer(); });
  loop_.on_wake([this] { on_wake(); });
  io_ = std::thread([this] { loop_.run(); });
}

Communicator::~Communicator() {
  loop_.stop();
  loop_.wake();
  io_.join();
  const std::string reason = "communicator closed before the allreduce finished";
  fail_pending(reason);
  for (auto& r : queue_) r.done.set_exception(std::make_exception_ptr(std::runtime_error(reason)));
}

std::unique_ptr<Communicator> Communicator::from_cluster(const control::ClusterConfig& cluster,
                                                         std::uint32_t job, std::size_t rank,
                                                         std::optional<std::uint16_t> run) {
  runtime::AddressBook book;
  engines::WorkerConfig config = cluster.worker_config(job, rank, book);
  config.run = run;
  config.claim_run = run.has_value();  // a launcher's run id: PS 0 refuses one already used
  config.join_nonce = std::random_device{}() | 1u;  // non-zero
  return std::make_unique<Communicator>(config, cluster.job(job).workers[rank].address,
                                        std::move(book), cluster.rank_positions(job));
}

std::unique_ptr<Communicator> Communicator::from_cluster_file(const std::string& path,
                                                              std::uint32_t job,
                                                              std::size_t rank,
                                                              std::optional<std::uint16_t> run) {
  return from_cluster(control::ClusterConfig::load(path), job, rank, run);
}

void Communicator::allreduce(std::span<const float> input, std::span<float> output) {
  allreduce_async(input, output).get();
}

std::future<void> Communicator::allreduce_async(std::span<const float> input,
                                                std::span<float> output) {
  if (input.size() != output.size())
    throw std::invalid_argument("allreduce: input and output sizes differ");
  return allreduce_async(quant::Precision::float32, input.data(), output.data(), input.size());
}

std::future<void> Communicator::allreduce_async(quant::Precision precision, const void* input,
                                                void* output, std::size_t count) {
  return enqueue(Request{precision, input, output, count, false, {}});
}

std::future<void> Communicator::reduce_scatter_async(quant::Precision precision,
                                                     const void* input, void* output,
                                                     std::size_t count) {
  if (ranks_.empty())
    throw std::logic_error("reduce_scatter: this Communicator was built without the job's "
                           "rank positions (ClusterConfig::rank_positions)");
  return enqueue(Request{precision, input, output, count, true, {}});
}

std::future<void> Communicator::enqueue(Request r) {
  std::future<void> done = r.done.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(r));
  }
  loop_.wake();
  return done;
}

engines::WorkerStats Communicator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::optional<std::uint16_t> Communicator::run() const {
  std::lock_guard lock(mutex_);
  return run_;
}

void Communicator::on_wake() {
  std::deque<Request> requests;
  {
    std::lock_guard lock(mutex_);
    requests.swap(queue_);
  }
  const Time now = runtime::monotonic_now();
  for (auto& r : requests) {
    try {
      submit(now, r);
    } catch (...) {
      try {
        r.done.set_exception(std::current_exception());
      } catch (const std::future_error&) {
        // Out of memory after the promise moved to its call: nothing left to tell it with.
      }
    }
  }
  after_engine();
}

// A reduce-scatter is a tensor per rank's shard, each naming that rank as its owner: the
// worker engine sends every shard and keeps only its own shard's values. Every shard is alike
// (same size, owners from the cluster file), so a submit that throws is the first one, with
// nothing of the call in flight; the promise moves only once nothing else can throw but
// memory.
void Communicator::submit(Time now, Request& r) {
  const std::size_t tensors = r.scatter ? ranks_.size() : 1;
  std::vector<std::uint32_t> ids;
  ids.reserve(tensors);
  const std::size_t bytes = r.count * quant::bytes_per_value(r.precision);
  for (std::size_t rank = 0; rank < tensors; ++rank) {
    if (!r.scatter) {
      ids.push_back(worker_.submit(now, r.precision, r.input, r.output, r.count, outbox_));
      break;
    }
    const bool mine = ranks_[rank] == proto::ResultOwner{config_.rack, config_.rank_in_rack};
    ids.push_back(worker_.submit(now, r.precision,
                                 static_cast<const std::uint8_t*>(r.input) + rank * bytes,
                                 mine ? r.output : nullptr, r.count, outbox_, ranks_[rank]));
  }
  auto call = std::make_shared<Call>();
  call->tensors_left = ids.size();
  call->done = std::move(r.done);
  for (std::uint32_t id : ids) pending_.emplace(id, call);
}

void Communicator::fail_pending(const std::string& reason) {
  for (auto& [id, call] : pending_) {
    if (call->tensors_left == 0) continue;  // failed through another of its tensors
    call->tensors_left = 0;
    call->done.set_exception(std::make_exception_ptr(std::runtime_error(reason)));
  }
  pending_.clear();
}

void Communicator::on_readable() {
  while (socket_.receive(received_) > 0) {
    const Time now = runtime::monotonic_now();
    arrivals_.clear();
    for (std::size_t i = 0; i < received_.size(); ++i) {
      // A result marked CE on its way down counts as congestion like a marked sum.
      if (received_.congestion_experienced(i)) proto::mark_ecn(received_.packet(i));
      arrivals_.push_back({received_.packet(i),
                           book_.find(received_.from(i)).value_or(kUnknownNode)});
    }
    worker_.on_packets(now, arrivals_, outbox_);
    after_engine();
  }
}

void Communicator::on_timer() {
  worker_.on_timer(runtime::monotonic_now(), outbox_);
  after_engine();
}

void Communicator::after_engine() {
  socket_.send(outbox_, book_, to_send_);
  {
    // Before any call completes: its caller reads stats that include it.
    std::lock_guard lock(mutex_);
    stats_ = worker_.stats();
    run_ = worker_.run();
  }
  for (std::uint32_t id : worker_.take_completed()) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    if (--it->second->tensors_left == 0) it->second->done.set_value();
    pending_.erase(it);
  }
  if (worker_.failed()) fail_pending(worker_.error());
  if (auto t = worker_.next_timer())
    loop_.arm(timer_, *t);
  else
    loop_.disarm(timer_);
}

}  // namespace atp
