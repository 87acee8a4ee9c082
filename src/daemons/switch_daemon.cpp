#include "daemons/switch_daemon.h"

namespace atp::daemons {

SwitchDaemon::SwitchDaemon(const control::ClusterConfig& config, const std::string& name)
    : name_(name), address_(config.switch_named(name).address) {
  const unsigned threads = config.switch_named(name).threads;
  for (unsigned t = 0; t < threads; ++t) {
    runtime::Endpoint port = address_;
    port.port = static_cast<std::uint16_t>(port.port + t);
    shards_.push_back(std::make_unique<Shard>(config.switch_config(name), port));
  }
  for (auto& shard : shards_)
    for (auto& job : config.switch_jobs(name, shard->book))
      if (shards_[config.thread_of(name, job.job)] == shard) shard->pipeline.add_job(std::move(job));
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

void SwitchDaemon::on_readable(Shard& s) {
  // At most 64 batches per wake-up: the loop then serves signals and the control socket too
  // (epoll is level-triggered, so what is left is read next round).
  for (int batches = 0; batches < 64 && s.socket.receive(s.received) > 0; ++batches) {
    {
      std::lock_guard lock(s.mutex);
      for (std::size_t i = 0; i < s.received.size(); ++i) {
        auto packet = s.received.packet(i);
        const NodeId from = s.book.find(s.received.from(i)).value_or(kUnknownNode);
        const engines::Forwarding f = s.pipeline.process(packet, from);
        switch (f.action) {
          case engines::Forwarding::Action::drop: break;
          case engines::Forwarding::Action::unicast:
            s.to_send.add(s.book.endpoint(f.to), packet);
            break;
          case engines::Forwarding::Action::multicast:
            for (NodeId member : f.group) s.to_send.add(s.book.endpoint(member), packet);
            break;
        }
      }
    }
    s.socket.send(s.to_send);
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
  for (auto& j : cluster.switch_jobs(name_, s.book))
    if (j.job == job) return s.pipeline.add_job(std::move(j));
  throw std::invalid_argument("job " + std::to_string(job) + " does not use switch '" + name_ + "'");
}

bool SwitchDaemon::remove_job(std::uint32_t job) {
  Shard* s = shard_of_job(job);
  if (s == nullptr) return false;
  std::lock_guard lock(s->mutex);
  return s->pipeline.remove_job(job);
}

nlohmann::json SwitchDaemon::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  std::uint64_t packets = 0, malformed = 0, unknown_job = 0, in_use = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mutex);
    for (std::uint32_t id : s->pipeline.jobs()) {
      const auto* c = s->pipeline.job_counters(id);
      jobs[std::to_string(id)] = {{"aggregated", c->aggregated},
                                  {"completed", c->completed},
                                  {"collisions", c->collisions},
                                  {"flushes", c->flushes},
                                  {"forwarded_to_ps", c->forwarded_to_ps},
                                  {"results_sent", c->results_sent},
                                  {"duplicates", c->duplicates},
                                  {"stale_reclaimed", c->stale_reclaimed},
                                  {"fan_in_mismatch", c->fan_in_mismatch},
                                  {"forged", c->forged}};
    }
    const auto& c = s->pipeline.counters();
    packets += c.packets;
    malformed += c.malformed;
    unknown_job += c.unknown_job;
    in_use += s->pipeline.pool().in_use();
  }
  return {{"switch", name_},
          {"threads", shards_.size()},
          {"packets", packets},
          {"malformed", malformed},
          {"unknown_job", unknown_job},
          {"aggregators_in_use", in_use},
          {"jobs", jobs}};
}

}  // namespace atp::daemons
