#include "daemons/ps_daemon.h"

#include <unistd.h>

#include <algorithm>
#include <random>

namespace atp::daemons {

namespace {

// Half of the machine's memory: room for the OS and the daemon's other state.
std::uint64_t half_of_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) / 2 : 1ull << 32;
}

std::string mib(std::uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

}  // namespace

PsDaemon::PsDaemon(const control::ClusterConfig& config, const std::string& name)
    : fabric_(config), name_(name), address_(config.server_named(name).address), socket_(address_),
      memory_budget_(config.server_named(name).memory_budget_mb > 0
                         ? config.server_named(name).memory_budget_mb << 20
                         : half_of_memory()) {
  for (auto& job : config.server_jobs(name, book_)) {
    jobs_.push_back(job.job);
    add_job(std::move(job));
  }
}

// Run ids start at random: a restarted PS must not hand a relaunched job the run its
// predecessor just used, whose partial sums switches may still hold.
// A job is added only if its state fits the budget at its worst beside the others' (a job
// admitted again replaces its own share).
void PsDaemon::add_job(engines::PsJob job) {
  const std::uint32_t id = job.job;
  const std::uint64_t need = engines::ParameterServer::memory_bound(job);
  std::uint64_t held = 0;
  for (const auto& [other, bytes] : memory_held_)
    if (other != id) held += bytes;
  if (held + need > memory_budget_)
    throw std::invalid_argument("parameter server '" + name_ + "': job " + std::to_string(id) +
                                " needs up to " + mib(need) + " (window, ring, K and workers); " +
                                budget_state() + " (memory_budget_mb of its [[ps]])");
  job.first_run = static_cast<std::uint16_t>(std::random_device{}());
  ps_.add_job(std::move(job));
  memory_held_[id] = need;
}

std::string PsDaemon::budget_state() const {
  std::uint64_t held = 0;
  for (const auto& [id, bytes] : memory_held_) held += bytes;
  return mib(held) + " of its " + mib(memory_budget_) + " budget are held by " +
         std::to_string(memory_held_.size()) + " jobs";
}

void PsDaemon::admit(const control::ClusterConfig& cluster, std::uint32_t job) {
  for (auto& j : cluster.server_jobs(name_, book_)) {
    if (j.job != job) continue;
    add_job(std::move(j));
    if (std::find(jobs_.begin(), jobs_.end(), job) == jobs_.end()) jobs_.push_back(job);
    return;
  }
  throw std::invalid_argument("job " + std::to_string(job) + " does not use parameter server '" +
                              name_ + "'");
}

bool PsDaemon::remove_job(std::uint32_t job) {
  std::erase(jobs_, job);
  memory_held_.erase(job);
  return ps_.remove_job(job);
}

void PsDaemon::set_home(std::uint32_t id, const control::Slice& home) {
  const engines::PsJob* job = ps_.job(id);
  const std::string which = "parameter server '" + name_ + "': job " + std::to_string(id);
  if (job == nullptr) throw std::invalid_argument(which + " is not here");
  if (job->home.count == 0 || job->pool_size == 0)
    throw std::invalid_argument(which + " plans no home (its placement is not planned)");
  if (job->borrow) throw std::invalid_argument(which + " borrows aggregators: it keeps its own home");
  if (home.count == 0 || std::uint64_t{home.first} + home.count > job->pool_size)
    throw std::invalid_argument(which + ": a home of " + std::to_string(home.count) + " from " +
                                std::to_string(home.first) + " is not within its pool of " +
                                std::to_string(job->pool_size));
  engines::HomeSlice slice = job->home;
  slice.first = home.first;
  slice.count = home.count;
  ps_.set_home(id, slice);
}

void PsDaemon::attach(runtime::EventLoop& loop) {
  loop.watch(socket_.fd(), [this] { on_readable(); });
}

void PsDaemon::on_readable() {
  for (int batches = 0; batches < 64 && socket_.receive(received_) > 0; ++batches) {
    const Time now = runtime::monotonic_now();
    for (std::size_t i = 0; i < received_.size(); ++i) {
      // A CE mark (a queue before the PS, such as incast on its link) goes into the result.
      if (received_.congestion_experienced(i)) proto::mark_ecn(received_.packet(i));
      // Whatever one datagram does, the PS goes on serving the others.
      try {
        ps_.on_packet(now, received_.packet(i), outbox_,
                      book_.find(received_.from(i)).value_or(kUnknownNode));
      } catch (const std::exception&) {
        ++packets_failed_;
      }
    }
    socket_.send(outbox_, book_, to_send_);
  }
}

nlohmann::json PsDaemon::stats() const {
  nlohmann::json jobs = nlohmann::json::object();
  for (std::uint32_t id : jobs_) {
    nlohmann::json& job = jobs[std::to_string(id)];
    engines::for_each_field(*ps_.job_counters(id),
                            [&](const char* name, std::uint64_t v) { job[name] = v; });
    job["entries_in_use"] = ps_.entries_in_use(id);
    if (const engines::PsJob* config = ps_.job(id); config && config->home.count > 0)
      job["home"] = {{"first", config->home.first}, {"count", config->home.count}};
  }
  nlohmann::json out = {{"ps", name_}, {"jobs", jobs},
                        {"ip_ce_received", socket_.counters().congestion_experienced},
                        {"packets_failed", packets_failed_}};
  engines::for_each_field(ps_.counters(), [&](const char* name, std::uint64_t v) { out[name] = v; });
  return out;
}

}  // namespace atp::daemons
