#include "daemons/switch_daemon.h"

namespace atp::daemons {

namespace {
// What a datagram from an address outside the switch's book arrives on.
constexpr engines::Port kStrangerPort = 0xFFFF;
}  // namespace

SwitchDaemon::SwitchDaemon(const control::ClusterConfig& config, const std::string& name)
    : fabric_(config), name_(name), address_(config.switch_named(name).address),
      ecn_backlog_bytes_(config.switch_named(name).ecn_backlog_bytes),
      ecn_receive_backlog_bytes_(config.switch_named(name).ecn_receive_backlog_bytes) {
  const unsigned threads = config.switch_named(name).threads;
  for (unsigned t = 0; t < threads; ++t) {
    runtime::Endpoint port = address_;
    port.port = static_cast<std::uint16_t>(port.port + t);
    shards_.push_back(std::make_unique<Shard>(config.switch_config(name), port));
  }
  for (auto& shard : shards_)
    for (auto& job : config.switch_jobs(name, shard->book))
      if (shards_[config.thread_of(name, job.job)] == shard) {
        control::reserve_file_slice(shard->slices, shard->pipeline.config().policy, job);
        shard->pipeline.add_job(std::move(job));
      }
  for (auto& shard : shards_) forget_unused_addresses(*shard);
}

SwitchDaemon::~SwitchDaemon() {
  for (std::size_t t = 1; t < shards_.size(); ++t) {
    Shard& s = *shards_[t];
    if (!s.thread.joinable()) continue;
    s.own_loop.stop();
    s.own_loop.wake();
    s.thread.join();
  }
}

void SwitchDaemon::attach(runtime::EventLoop& loop) {
  loop.watch(shards_[0]->socket.fd(), [this] { on_readable(*shards_[0]); });
  for (std::size_t t = 1; t < shards_.size(); ++t) {
    Shard& s = *shards_[t];
    s.own_loop.watch(s.socket.fd(), [this, &s] { on_readable(s); });
    s.own_loop.on_wake([] {});
    s.thread = std::thread([&s] { s.own_loop.run(); });
  }
}

// Congestion, as the P4 program sees it in its egress queue's depth: here the bytes the kernel
// holds for this shard's socket, sent and still queued at an egress device (a link is the
// bottleneck), or received and unread (the switch's CPU is). Per socket, not per port: one
// deep queue marks all that leaves in this batch. The receive side has its own, higher
// threshold: on a shared host the switch is descheduled for milliseconds now and then, and
// marking those gaps held a 200 Mbit/s job to 0.7-0.8 of its wire ceiling (docs/benchmarks.md).
bool SwitchDaemon::congested(const Shard& s) const {
  const runtime::SocketBacklog b = s.socket.backlog();
  return (ecn_backlog_bytes_ > 0 && b.send > ecn_backlog_bytes_) ||
         (ecn_receive_backlog_bytes_ > 0 && b.receive > ecn_receive_backlog_bytes_);
}

void SwitchDaemon::on_readable(Shard& s) {
  // At most 64 batches per wake-up: the loop then serves signals and the control socket too
  // (epoll is level-triggered, so what is left is read next round).
  for (int batches = 0; batches < 64 && s.socket.receive(s.received) > 0; ++batches) {
    {
      std::lock_guard lock(s.mutex);
      const Time now = runtime::monotonic_now();
      const bool mark = congested(s);
      for (std::size_t i = 0; i < s.received.size(); ++i) {
        auto packet = s.received.packet(i);
        // A CE mark from a queue before this switch enters the packet, and the aggregator's
        // sticky bit, as the ATP header's ecn flag.
        if (s.received.congestion_experienced(i)) {
          proto::mark_ecn(packet);
          ++s.ip_ce_received;
        }
        // A stranger gets a port no job lists, so it may speak for none.
        const auto from = s.book.find(s.received.from(i));
        const engines::Port port = from && *from < kStrangerPort ? engines::port_of_node(*from) : kStrangerPort;
        // Whatever one datagram does, the switch goes on serving the others.
        try {
          forward(s, s.pipeline.process(packet, port, now, mark), packet);
        } catch (const std::exception&) {
          ++s.packets_failed;
        }
      }
    }
    s.socket.send(s.to_send);
  }
}

void SwitchDaemon::forward(Shard& s, const engines::Verdict& v, std::span<const std::uint8_t> packet) {
  switch (v.action) {
    case engines::Verdict::Action::drop: break;
    case engines::Verdict::Action::port:
      s.to_send.add_borrowed(s.book.endpoint(engines::node_of_port(v.port)), packet);
      break;
    case engines::Verdict::Action::multicast: {
      // Only to members that proved, for this job, that they hold their address.
      const std::span<const engines::Port> members = s.pipeline.multicast_ports(v.group);
      const std::vector<bool>* heard = s.pipeline.heard_members(v.group);
      for (std::size_t i = 0; i < members.size(); ++i)
        if (heard != nullptr && (*heard)[i])
          s.to_send.add_borrowed(s.book.endpoint(engines::node_of_port(members[i])), packet);
        else
          ++s.unheard_copies;
      break;
    }
  }
}

SwitchDaemon::Shard* SwitchDaemon::shard_of_job(std::uint32_t job) const {
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    if (s->pipeline.job_counters(job) != nullptr) return s.get();
  }
  return nullptr;
}

std::vector<std::uint32_t> SwitchDaemon::job_ids() const {
  std::vector<std::uint32_t> ids;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    for (std::uint32_t id : s->pipeline.jobs()) ids.push_back(id);
  }
  return ids;
}

void SwitchDaemon::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  Shard& s = *shards_[cluster.thread_of(name_, job) % shards_.size()];
  std::lock_guard lock(s.mutex);
  std::optional<engines::SwitchJob> entry;
  for (auto& j : cluster.switch_jobs(name_, s.book))
    if (j.job == job) entry = std::move(j);
  try {
    if (!entry)
      throw std::invalid_argument("job " + std::to_string(job) + " does not use switch '" + name_ + "'");
    install(s, std::move(*entry));
  } catch (...) {
    forget_unused_addresses(s);  // the file named every job's members: keep only the installed
    throw;
  }
  forget_unused_addresses(s);
}

// The entry as the file derives it, but for the static slice: the file cuts the pool among
// the jobs it names, which would overlap what running jobs hold; the allocator gives a free run.
void SwitchDaemon::install(Shard& s, engines::SwitchJob job) {
  control::place_static_slice(s.slices, s.pipeline.config().policy, job, name_);
  try {
    s.pipeline.add_job(std::move(job));
  } catch (...) {
    s.slices.release(job.job);
    throw;
  }
}

std::optional<control::Slice> SwitchDaemon::static_slice(std::uint32_t job) const {
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    if (auto slice = s->slices.slice_of(job)) return slice;
  }
  return std::nullopt;
}

bool SwitchDaemon::remove_job(std::uint32_t job) {
  Shard* s = shard_of_job(job);
  if (s == nullptr) return false;
  std::lock_guard lock(s->mutex);
  s->slices.release(job);
  const bool removed = s->pipeline.remove_job(job);
  forget_unused_addresses(*s);
  return removed;
}

// Admissions and removals would otherwise grow the book without end, until ids ran past the
// port numbers a switch has (a datagram from such an address then had no port to arrive on).
void SwitchDaemon::forget_unused_addresses(Shard& s) {
  std::vector<NodeId> used;
  for (std::uint32_t id : s.pipeline.jobs()) {
    const engines::SwitchJob& job = *s.pipeline.job(id);
    for (engines::Port p : job.downstream) used.push_back(engines::node_of_port(p));
    for (engines::Port p : job.upstream) used.push_back(engines::node_of_port(p));
  }
  s.book.keep_only(used);
}

nlohmann::json SwitchDaemon::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  engines::SwitchCounters totals;
  std::uint64_t in_use = 0, ce_received = 0, failed = 0, unheard = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    ce_received += s->ip_ce_received;
    failed += s->packets_failed;
    unheard += s->unheard_copies;
    for (std::uint32_t id : s->pipeline.jobs()) {
      nlohmann::json& job = jobs[std::to_string(id)];
      engines::for_each_field(*s->pipeline.job_counters(id),
                              [&](const char* name, std::uint64_t v) { job[name] = v; });
      if (const auto slice = s->slices.slice_of(id))
        job["static_slice"] = {slice->first, slice->count};
    }
    engines::add_counters(totals, s->pipeline.counters());
    in_use += s->pipeline.registers().in_use();
  }
  nlohmann::json out = {{"switch", name_}, {"threads", shards_.size()},
                        {"aggregators_in_use", in_use}, {"ip_ce_received", ce_received},
                        {"packets_failed", failed}, {"unheard_copies", unheard},
                        {"jobs", jobs}};
  engines::for_each_field(totals, [&](const char* name, std::uint64_t v) { out[name] = v; });
  return out;
}

}  // namespace atp::daemons
