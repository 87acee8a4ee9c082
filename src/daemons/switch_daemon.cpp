#include "daemons/switch_daemon.h"

namespace atp::daemons {

SwitchDaemon::SwitchDaemon(const control::ClusterConfig& config, const std::string& name)
    : name_(name), address_(config.switch_named(name).address),
      pipeline_(config.switch_config(name)), socket_(address_) {
  for (auto& job : config.switch_jobs(name, book_)) pipeline_.add_job(std::move(job));
}

void SwitchDaemon::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  for (auto& j : cluster.switch_jobs(name_, book_))
    if (j.job == job) return pipeline_.add_job(std::move(j));
  throw std::invalid_argument("job " + std::to_string(job) + " does not use switch '" + name_ + "'");
}

void SwitchDaemon::attach(runtime::EventLoop& loop) {
  loop.watch(socket_.fd(), [this] { on_readable(); });
}

void SwitchDaemon::on_readable() {
  while (socket_.receive(received_) > 0) {
    for (std::size_t i = 0; i < received_.size(); ++i) {
      auto packet = received_.packet(i);
      const NodeId from = book_.find(received_.from(i)).value_or(kUnknownNode);
      const engines::Forwarding f = pipeline_.process(packet, from);
      switch (f.action) {
        case engines::Forwarding::Action::drop: break;
        case engines::Forwarding::Action::unicast:
          to_send_.add(book_.endpoint(f.to), packet);
          break;
        case engines::Forwarding::Action::multicast:
          for (NodeId member : f.group) to_send_.add(book_.endpoint(member), packet);
          break;
      }
    }
    socket_.send(to_send_);
  }
}

nlohmann::json SwitchDaemon::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  for (std::uint32_t id : pipeline_.jobs()) {
    const auto* c = pipeline_.job_counters(id);
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
  const auto& c = pipeline_.counters();
  return {{"switch", name_},
          {"packets", c.packets},
          {"malformed", c.malformed},
          {"unknown_job", c.unknown_job},
          {"aggregators_in_use", pipeline_.pool().in_use()},
          {"jobs", jobs}};
}

}  // namespace atp::daemons
