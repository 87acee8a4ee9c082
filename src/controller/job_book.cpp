#include "controller/job_book.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "control/home_lending.h"
#include "control/private_file.h"
#include "engines/ps/parameter_server.h"
#include "engines/switch/switch_tables.h"

namespace atp::controller {

namespace {
using Kind = ControllerError::Kind;

// Why no single host can hold `ip` (host order), or null: a job's results go to each worker's
// address, so one that names a network, a broadcast or a multicast group would have the
// switches send its traffic at hosts that never asked for it.
const char* unroutable(std::uint32_t ip) {
  if ((ip >> 24) == 0) return "is in 0.0.0.0/8 (this network: no host's address)";
  if (ip == 0xFFFFFFFFu) return "is the broadcast address";
  if ((ip >> 28) == 0xE) return "is a multicast group (224.0.0.0/4)";
  if ((ip >> 28) == 0xF) return "is reserved (240.0.0.0/4)";
  return nullptr;
}
// 2: each job's claim and lease end on the wall clock (version 1 gave every job a full lease
// at each restart, so a job nobody could renew never lapsed).
constexpr int kStateVersion = 2;
}  // namespace

std::string random_hex(unsigned bits) {
  std::random_device os;  // getrandom(2) on Linux
  std::string out;
  static constexpr char kDigits[] = "0123456789abcdef";
  for (unsigned i = 0; i < bits / 4; ++i) out += kDigits[os() & 0xF];
  return out;
}

JobBook::JobBook(std::string fabric_text, const std::string& origin, Limits limits)
    : fabric_text_(without_tenants(fabric_text, origin)),
      fabric_(control::ClusterConfig::parse(fabric_text_, origin)),
      limits_(limits) {
  if (!fabric_.jobs().empty())
    throw std::invalid_argument(origin + ": a fabric file for the controller lists no [[job]]: "
                                "the controller admits jobs at run time");
  if (fabric_.servers().empty()) throw std::invalid_argument(origin + ": no [[ps]] in the fabric");
  if (!fabric_text_.empty() && fabric_text_.back() != '\n') fabric_text_ += '\n';
}

AdmittedJob JobBook::prepare(const JobRequest& r, Time now) const {
  if (r.workers.empty()) throw ControllerError(Kind::invalid, "a job needs at least one worker");
  if (r.workers.size() > limits_.max_workers)
    throw ControllerError(Kind::invalid, "more than " + std::to_string(limits_.max_workers) + " workers");
  std::set<std::uint64_t> seen;
  for (const auto& w : r.workers) {
    if (!seen.insert(w.address.key()).second)
      throw ControllerError(Kind::invalid, "worker address " + w.address.str() + " is listed twice");
    if (const char* why = unroutable(w.address.ip))
      throw ControllerError(Kind::invalid, "worker address " + w.address.str() + " " + why);
  }
  if (jobs_.size() >= limits_.max_jobs)
    throw ControllerError(Kind::refused, "the controller holds its maximum of " +
                                             std::to_string(limits_.max_jobs) + " jobs");
  if (r.terms.parameter_servers > fabric_.servers().size())
    throw ControllerError(Kind::invalid, "asks for " + std::to_string(r.terms.parameter_servers) +
                                             " parameter servers; the fabric has " +
                                             std::to_string(fabric_.servers().size()));
  AdmittedJob a;
  a.name = r.name;
  a.credential = random_hex(128);
  a.lease = lease_of(r.terms.lease_seconds);
  a.lease_ends = now + a.lease;
  control::JobConfig& j = a.config;
  j.id = next_free_id();
  j.token = static_cast<std::uint32_t>(std::random_device{}());
  j.workers = r.workers;
  j.window = r.terms.window ? r.terms.window : j.window;
  if (j.window > limits_.max_window)
    throw ControllerError(Kind::refused, "window " + std::to_string(j.window) + " is above this controller's limit of " +
                                             std::to_string(limits_.max_window) + " (--max-window)");
  j.values_per_packet = r.terms.values_per_packet ? static_cast<std::uint16_t>(std::min<std::uint32_t>(
                                                  r.terms.values_per_packet, 0xFFFF))
                                            : default_values_per_packet(r);
  j.max_gradient = r.terms.max_gradient > 0 ? r.terms.max_gradient : j.max_gradient;
  if (r.terms.deadline_ms) j.deadline = Duration{r.terms.deadline_ms} * kMillisecond;
  j.aggregator_window = r.terms.aggregator_window;
  j.parameter_servers = pick_servers(std::max<std::uint32_t>(r.terms.parameter_servers, 1), now);
  j.static_aggregators = r.terms.static_aggregators;
  if (j.static_aggregators == 0)  // a share every static switch can give (the smallest pool's)
    for (const auto& s : fabric_.switches())
      if (s.policy == engines::Policy::static_partition) {
        const std::uint32_t share = std::max(1u, s.aggregators / s.threads / std::max(1u, limits_.static_share));
        j.static_aggregators = j.static_aggregators == 0 ? share : std::min(j.static_aggregators, share);
      }
  if (j.placement == engines::Placement::planned) assign_home(a);
  try {
    cluster_of(a);  // every rule a cluster file obeys: racks, fan-ins, K, window, ...
  } catch (const std::invalid_argument& e) {
    throw ControllerError(Kind::invalid, e.what());
  }
  a.tenant = r.tenant;
  if (limits_.quotas.contains(a.tenant)) a.ps_memory = ps_memory_of(a);
  check_quota(a);
  return a;
}

namespace {

// What a job holds of the pools: its ATP home or its static slice, per switch thread.
std::uint64_t aggregators_of(const control::JobConfig& j) {
  return j.home_count > 0 ? j.home_count : j.static_aggregators;
}

}  // namespace

// PS memory counts each job at its worst on every PS it uses (ParameterServer::memory_bound),
// as the PSs' own budgets do.
std::uint64_t JobBook::ps_memory_of(const AdmittedJob& job) const {
  const control::ClusterConfig cluster = cluster_of(job);
  runtime::AddressBook book;
  std::uint64_t bytes = 0;
  for (const auto& ps : job.config.parameter_servers)
    for (const engines::PsJob& entry : cluster.server_jobs(ps, book))
      if (entry.job == job.config.id) bytes += engines::ParameterServer::memory_bound(entry);
  return bytes;
}

// The tenant's jobs with this one against its quota; RESOURCE_EXHAUSTED naming the quota.
void JobBook::check_quota(const AdmittedJob& job) const {
  const auto quota = limits_.quotas.find(job.tenant);
  if (job.tenant.empty() || quota == limits_.quotas.end()) return;
  const Quota& q = quota->second;
  std::uint64_t jobs = 1, aggregators = aggregators_of(job.config), memory = job.ps_memory;
  for (const auto& [id, other] : jobs_) {
    if (other.tenant != job.tenant) continue;
    ++jobs;
    aggregators += aggregators_of(other.config);
    memory += other.ps_memory;
  }
  auto refuse = [&](const char* what, std::uint64_t would, std::uint64_t max, const char* unit) {
    throw ControllerError(Kind::refused, "tenant '" + job.tenant + "' would hold " +
                                             std::to_string(would) + unit + ", above its " + what +
                                             " of " + std::to_string(max) + " (its [[tenant]] in the fabric file)");
  };
  if (q.max_jobs > 0 && jobs > q.max_jobs) refuse("max_jobs", jobs, q.max_jobs, " jobs");
  if (q.max_aggregators > 0 && aggregators > q.max_aggregators)
    refuse("max_aggregators", aggregators, q.max_aggregators, " aggregators");
  const std::uint64_t mib = (memory + (1 << 20) - 1) >> 20;
  if (q.max_ps_memory_mb > 0 && mib > q.max_ps_memory_mb)
    refuse("max_ps_memory_mb", mib, q.max_ps_memory_mb, " MiB of PS memory");
}

namespace {

// The ATP switches whose aggregators a job's home indexes: its racks' switches, and their
// level-2 uplink when it spans racks (a one-rack job's sums pass the spine unaggregated).
std::vector<const control::SwitchSpec*> atp_switches_of(const control::ClusterConfig& fabric,
                                                        const control::JobConfig& j) {
  std::set<std::string> racks;
  for (const auto& w : j.workers) racks.insert(w.rack);
  std::set<std::string> names = racks;
  for (const control::SwitchSpec& s : fabric.switches())
    if (racks.size() > 1 && racks.contains(s.name) && !s.uplink.empty()) names.insert(s.uplink);
  std::vector<const control::SwitchSpec*> out;
  for (const control::SwitchSpec& s : fabric.switches())  // (an unknown rack: cluster_of says)
    if (names.contains(s.name) && s.policy == engines::Policy::atp && s.aggregators >= s.threads)
      out.push_back(&s);
  return out;
}

}  // namespace

// Planned placement's home for a job admitted on its own (ClusterConfig::home_of reads it). A
// file's jobs share one cut of the pool, but the controller never knows its future jobs, and a
// job alone in its cluster text would take the whole pool at index 0 as every other job did
// (each colliding on every turn with the others). So: the share a static job gets (1 /
// static_share of the smallest ATP pool the job's aggregation crosses, at most its window), at
// the block the fewest admitted jobs' homes overlap on any switch thread it shares with them:
// disjoint while they fit, evenly shared beyond. A job admitted without a home (a state from
// before homes) counts as holding its whole pool.
std::vector<std::uint64_t> JobBook::home_threads_of(const control::JobConfig& j) const {
  return thread_keys(atp_switches_of(fabric_, j), j.id);
}

std::vector<std::uint64_t> JobBook::thread_keys(const std::vector<const control::SwitchSpec*>& switches,
                                                std::uint32_t id) const {
  std::vector<std::uint64_t> keys;
  for (const auto* s : switches)
    keys.push_back(std::uint64_t(s - fabric_.switches().data()) << 32 | fabric_.thread_of(s->name, id));
  return keys;
}

void JobBook::assign_home(AdmittedJob& a) const {
  control::JobConfig& j = a.config;
  const auto mine = atp_switches_of(fabric_, j);
  a.home_threads = thread_keys(mine, j.id);
  if (mine.empty()) return;
  std::uint32_t pool = ~0u;
  for (const auto* s : mine) pool = std::min(pool, s->aggregators / s->threads);
  const std::uint32_t count =
      std::clamp(std::min(j.window, pool / std::max(1u, limits_.static_share)), 1u, pool);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> taken;  // [first, end) of sharing jobs
  for (const auto& [id, other] : jobs_) {
    const bool shares = std::any_of(other.home_threads.begin(), other.home_threads.end(),
                                    [&](std::uint64_t k) {
                                      return std::find(a.home_threads.begin(),
                                                       a.home_threads.end(), k) !=
                                             a.home_threads.end();
                                    });
    if (shares && other.config.placement == engines::Placement::planned)
      taken.emplace_back(other.config.home_first,
                         other.config.home_count > 0
                             ? other.config.home_first + other.config.home_count
                             : ~0u);
  }
  std::uint32_t best = 0, fewest = ~0u;
  for (std::uint32_t first = 0; first + count <= pool; first += count) {
    std::uint32_t overlapping = 0;
    for (const auto& [begin, end] : taken) overlapping += begin < first + count && first < end;
    if (overlapping < fewest) {
      fewest = overlapping;
      best = first;
    }
  }
  j.home_first = best;
  j.home_count = count;
}

std::map<std::uint32_t, control::Slice> JobBook::homes_to_plan_on(const AdmittedJob* arriving,
                                                                  bool lend) const {
  std::vector<const AdmittedJob*> planned;
  for (const auto& [id, job] : jobs_)
    if (job.config.placement == engines::Placement::planned) planned.push_back(&job);
  if (arriving && arriving->config.placement == engines::Placement::planned)
    planned.push_back(arriving);
  std::map<std::uint32_t, control::Slice> out;
  // Narrowed below to what every thread lends it. Only a job with an ATP rack switch has PSs
  // that plan a home (ClusterConfig::home_of); one aggregated at its spine alone has none.
  auto plans_a_home = [&](const AdmittedJob& a) {
    return a.config.home_count > 0 &&
           std::ranges::any_of(a.home_threads, [&](std::uint64_t k) {
             return fabric_.switches()[k >> 32].level == proto::Level::rack;
           });
  };
  for (const AdmittedJob* a : planned)
    if (plans_a_home(*a))
      out[a->config.id] = lend ? control::Slice{0, ~0u}
                               : control::Slice{a->config.home_first, a->config.home_count};
  if (!lend) return out;
  std::set<std::uint64_t> threads;
  for (const AdmittedJob* a : planned) threads.insert(a->home_threads.begin(), a->home_threads.end());
  for (const std::uint64_t thread : threads) {
    const control::SwitchSpec& s = fabric_.switches()[thread >> 32];
    const std::uint32_t pool = s.aggregators / s.threads;
    std::vector<std::uint32_t> ids, wants;
    std::vector<control::Slice> homes;
    for (const AdmittedJob* a : planned) {
      if (std::ranges::count(a->home_threads, thread) == 0) continue;
      const control::JobConfig& j = a->config;
      ids.push_back(j.id);
      // A job admitted without a home (a state from before homes) holds the whole pool.
      homes.push_back(j.home_count > 0 ? control::Slice{j.home_first, j.home_count} : control::Slice{0, pool});
      wants.push_back(j.borrow_aggregators ? 0 : j.window);
    }
    const auto grown = control::lend_idle_pool(homes, pool, std::max(1u, pool / std::max(1u, limits_.static_share)), wants);
    for (std::size_t i = 0; i < ids.size(); ++i) {  // a home free on every thread the job crosses
      if (!out.contains(ids[i])) continue;
      control::Slice& now = out[ids[i]];
      const std::uint64_t end = std::min<std::uint64_t>(std::uint64_t{now.first} + now.count,
                                                        std::uint64_t{grown[i].first} + grown[i].count);
      now.first = std::max(now.first, grown[i].first);
      now.count = static_cast<std::uint32_t>(end - now.first);
    }
  }
  return out;
}

void JobBook::record(AdmittedJob job) {
  const std::uint32_t id = job.config.id;
  for (const auto& ps : job.config.parameter_servers) ++server_load_[ps];
  jobs_[id] = std::move(job);
  next_id_ = id % engines::kMaxSwitchJobId + 1;
}

std::optional<AdmittedJob> JobBook::erase(std::uint32_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  AdmittedJob job = std::move(it->second);
  jobs_.erase(it);
  for (const auto& ps : job.config.parameter_servers) --server_load_[ps];
  return job;
}

const AdmittedJob* JobBook::find(std::uint32_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const AdmittedJob& JobBook::at(std::uint32_t id) const {
  if (const AdmittedJob* j = find(id)) return *j;
  throw ControllerError(Kind::not_found, "no job " + std::to_string(id));
}

bool JobBook::renew(std::uint32_t id, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) throw ControllerError(Kind::not_found, "no job " + std::to_string(id));
  it->second.lease_ends = now + it->second.lease;
  const bool first = !it->second.claimed;
  it->second.claimed = true;
  return first;
}

void JobBook::unclaim(std::uint32_t id) {
  if (auto it = jobs_.find(id); it != jobs_.end()) it->second.claimed = false;
}

std::vector<std::uint32_t> JobBook::expired(Time now) const {
  std::vector<std::uint32_t> out;
  for (const auto& [id, job] : jobs_)
    if (now >= job.lease_ends) out.push_back(id);
  return out;
}

std::vector<std::uint32_t> JobBook::ids() const {
  std::vector<std::uint32_t> out;
  for (const auto& [id, job] : jobs_) out.push_back(id);
  return out;
}

control::ClusterConfig JobBook::cluster_of(const AdmittedJob& job) const {
  return fabric_.with_jobs_from(control::job_toml(job.config), "job " + std::to_string(job.config.id));
}

std::string JobBook::cluster_text(const AdmittedJob& job) const {
  return fabric_text_ + "\n" + control::job_toml(job.config);
}

// Round from the last id handed out, so a removed job's id comes back as late as possible.
std::uint32_t JobBook::next_free_id() const {
  std::uint32_t id = next_id_;
  for (std::uint32_t tried = 0; tried < engines::kMaxSwitchJobId; ++tried) {
    if (!jobs_.contains(id)) return id;
    id = id % engines::kMaxSwitchJobId + 1;
  }
  throw ControllerError(Kind::refused, "no free job id (and multicast group) left");
}

// The least loaded servers, in fabric order among equals; the ones marked unresponsive last.
std::vector<std::string> JobBook::pick_servers(std::uint32_t count, Time now) const {
  std::vector<std::tuple<bool, std::size_t, std::size_t>> load;  // (unresponsive, jobs, position)
  for (std::size_t i = 0; i < fabric_.servers().size(); ++i) {
    const std::string& name = fabric_.servers()[i].name;
    const auto jobs = server_load_.find(name);
    const auto mark = unresponsive_until_.find(name);
    load.emplace_back(mark != unresponsive_until_.end() && mark->second > now,
                      jobs == server_load_.end() ? 0 : jobs->second, i);
  }
  std::ranges::sort(load);
  std::vector<std::string> out;
  for (std::uint32_t k = 0; k < count; ++k) out.push_back(fabric_.servers()[std::get<2>(load[k])].name);
  return out;
}

void JobBook::mark_unresponsive(const std::string& server, Time until) {
  unresponsive_until_[server] = until;
}

// What one packet of the switches that aggregate the job carries: its racks', and their
// uplink's when it spans racks.
std::uint16_t JobBook::default_values_per_packet(const JobRequest& r) const {
  std::set<std::string> racks;
  for (const auto& w : r.workers) racks.insert(w.rack);
  std::uint16_t k = proto::kMaxValues;
  for (const auto& s : fabric_.switches())
    if (racks.contains(s.name)) {
      k = std::min(k, s.values_per_aggregator);
      if (racks.size() > 1 && !s.uplink.empty())
        k = std::min(k, fabric_.switch_named(s.uplink).values_per_aggregator);
    }
  return k;
}

Duration JobBook::lease_of(std::uint32_t seconds) const {
  if (seconds == 0) return limits_.default_lease;
  const Duration lease = Duration{seconds} * kSecond;
  if (lease > limits_.max_lease)
    throw ControllerError(Kind::invalid, "lease_seconds beyond the controller's maximum of " +
                                             std::to_string(limits_.max_lease / kSecond));
  return lease;
}

void JobBook::save(const std::string& path, Instant now) const {
  nlohmann::json state = {{"version", kStateVersion}, {"next_id", next_id_}, {"jobs", nlohmann::json::array()}};
  for (const auto& [id, job] : jobs_) {
    const Duration left = std::max<Duration>(job.lease_ends - now.monotonic, 0);
    state["jobs"].push_back({{"job_toml", control::job_toml(job.config)}, {"name", job.name},
                             {"credential", job.credential}, {"lease_ms", job.lease / kMillisecond},
                             {"tenant", job.tenant},
                             {"claimed", job.claimed},
                             {"restart_grace_used", job.restart_grace_used},
                             {"lease_ends_unix_ms", now.unix_ms + left / kMillisecond}});
  }
  try {
    control::write_private_file(path, state.dump(2) + "\n");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("the controller state: ") + e.what());
  }
}

// What is left of a restored job's lease. A claimed job gets a full one: its tenant could not
// renew while the controller was down. An unclaimed one keeps what was left when saved, less
// the time since; if that ran out while the controller was down, it gets one grace, time for
// a first renewal (lease / 3 + 5 s), once in its life: a job whose admission was never
// answered cannot be renewed by anyone, and lapses after it.
Duration JobBook::restored_lease(AdmittedJob& a, const nlohmann::json& saved, Instant now) const {
  if (a.claimed) return a.lease;
  const std::int64_t left_ms =
      std::clamp<std::int64_t>(saved.at("lease_ends_unix_ms").get<std::int64_t>() - now.unix_ms, 0,
                               a.lease / kMillisecond);
  if (left_ms > 0 || a.restart_grace_used) return left_ms * kMillisecond;
  a.restart_grace_used = true;
  return std::min(a.lease, a.lease / 3 + 5 * kSecond);
}

void JobBook::load(const std::string& path, Instant now) {
  std::ifstream in(path);
  if (!in) return;  // no state yet: a first start
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(in);
    const int version = state.at("version").get<int>();
    if (version != 1 && version != kStateVersion)
      throw std::invalid_argument("state version " + state.at("version").dump());
    const auto next_id = state.at("next_id").get<std::uint32_t>();
    for (const auto& j : state.at("jobs")) {
      AdmittedJob a;
      const auto jobs = fabric_.with_jobs_from(j.at("job_toml").get<std::string>(), path).jobs();
      a.config = jobs.at(0);
      a.name = j.at("name").get<std::string>();
      a.credential = j.at("credential").get<std::string>();
      a.tenant = j.value("tenant", std::string());
      if (limits_.quotas.contains(a.tenant)) a.ps_memory = ps_memory_of(a);
      a.home_threads = home_threads_of(a.config);
      a.lease = j.at("lease_ms").get<Duration>() * kMillisecond;
      // A version 1 state knew no claims: its jobs keep what that version gave them.
      a.claimed = version == 1 || j.at("claimed").get<bool>();
      a.restart_grace_used = j.value("restart_grace_used", false);
      a.lease_ends = now.monotonic + restored_lease(a, j, now);
      record(std::move(a));
    }
    next_id_ = next_id;  // record() moved it past each loaded job
  } catch (const std::exception& e) {
    throw std::invalid_argument(path + ": unreadable controller state (" + e.what() + ")");
  }
}

}  // namespace atp::controller
