#include "libatp/communicator.h"

#include <random>
#include <stdexcept>

namespace atp {

Communicator::Communicator(engines::WorkerConfig config, runtime::Endpoint bind,
                           runtime::AddressBook book)
    : Communicator(config, runtime::UdpSocket(bind), std::move(book)) {}

Communicator::Communicator(engines::WorkerConfig config, runtime::UdpSocket socket,
                           runtime::AddressBook book)
    : config_(config), book_(std::move(book)), socket_(std::move(socket)), worker_(config),
      run_(worker_.run()) {
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
  for (auto& [id, p] : pending_) p.set_exception(std::make_exception_ptr(std::runtime_error(reason)));
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
                                        std::move(book));
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
  Request r{precision, input, output, count, {}};
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
      const std::uint32_t id = worker_.submit(now, r.precision, r.input, r.output, r.count, outbox_);
      pending_.emplace(id, std::move(r.done));
    } catch (...) {
      r.done.set_exception(std::current_exception());
    }
  }
  after_engine();
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
  for (std::uint32_t id : worker_.take_completed()) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    it->second.set_value();
    pending_.erase(it);
  }
  if (worker_.failed()) {
    for (auto& [id, p] : pending_)
      p.set_exception(std::make_exception_ptr(std::runtime_error(worker_.error())));
    pending_.clear();
  }
  if (auto t = worker_.next_timer())
    loop_.arm(timer_, *t);
  else
    loop_.disarm(timer_);
  std::lock_guard lock(mutex_);
  stats_ = worker_.stats();
  run_ = worker_.run();
}

}  // namespace atp
