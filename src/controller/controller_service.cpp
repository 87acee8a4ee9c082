#include "controller/controller_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "engines/switch/switch_tables.h"
#include "control/same_secret.h"
#include "controller/controller_client.h"
#include "runtime/event_loop.h"

namespace atp::controller {

namespace {

using control::same_secret;
using Kind = ControllerError::Kind;

grpc::Status status_of(const ControllerError& e) {
  static const std::map<Kind, grpc::StatusCode> codes = {
      {Kind::invalid, grpc::StatusCode::INVALID_ARGUMENT},
      {Kind::refused, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {Kind::not_found, grpc::StatusCode::NOT_FOUND},
      {Kind::denied, grpc::StatusCode::PERMISSION_DENIED},
      {Kind::failed, grpc::StatusCode::UNAVAILABLE}};
  return {codes.at(e.kind), e.what()};
}

// Runs one call: a ControllerError becomes its status, anything else an INTERNAL one.
template <typename Body>
grpc::Status guarded(const char* call, Body&& body) {
  try {
    body();
    return grpc::Status::OK;
  } catch (const ControllerError& e) {
    spdlog::info("controller: {} refused: {}", call, e.what());
    return status_of(e);
  } catch (const std::exception& e) {
    spdlog::error("controller: {} failed: {}", call, e.what());
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

std::string credential_of(const grpc::ServerContext* context) {
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find(kCredentialKey);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

JobRequest request_of(const v1::AdmitJobRequest& r) {
  JobRequest out;
  out.name = r.name();
  if (out.name.size() > 256) throw ControllerError(Kind::invalid, "name longer than 256 bytes");
  for (const auto& w : r.workers()) {
    control::WorkerSpec spec;
    spec.rack = w.rack();
    const auto address = runtime::Endpoint::parse(w.address());
    if (!address || address->port == 0)
      throw ControllerError(Kind::invalid, "worker address '" + w.address() + "' is not IP:port");
    spec.address = *address;
    out.workers.push_back(spec);
  }
  out.terms = terms_of(r);
  return out;
}

}  // namespace

ControllerService::ControllerService(JobBook book, ServiceOptions options)
    : book_(std::move(book)), fabric_(options.daemon_secret), options_(std::move(options)) {}

Instant instant_now() {
  return {runtime::monotonic_now(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count()};
}

void ControllerService::save() const {
  if (!options_.state_path.empty()) book_.save(options_.state_path, instant_now());
}

// Who admits: the tenant whose credential came with the call, or nobody in particular (the
// controller's admission credential, or none where the controller asks for none).
std::string ControllerService::admitting_tenant(grpc::ServerContext* context) const {
  const std::string presented = credential_of(context);
  for (const Tenant& t : options_.tenants)
    if (same_secret(presented, t.credential)) return t.name;
  if (options_.admit_credential.empty() ? options_.tenants.empty()
                                        : same_secret(presented, options_.admit_credential))
    return {};
  throw ControllerError(Kind::denied, options_.tenants.empty()
                                          ? "admission needs the admission credential"
                                          : "admission needs a tenant's credential");
}

void ControllerService::require_operator(grpc::ServerContext* context) const {
  if (options_.operator_credential.empty())
    throw ControllerError(Kind::denied, "this controller was started without an operator "
                                        "credential (--operator-credential-file)");
  if (!same_secret(credential_of(context), options_.operator_credential))
    throw ControllerError(Kind::denied, "needs the operator's credential");
}

const AdmittedJob& ControllerService::job_for(grpc::ServerContext* context, std::uint32_t id) const {
  const std::string presented = credential_of(context);
  const bool is_operator = !options_.operator_credential.empty() &&
                           same_secret(presented, options_.operator_credential);
  const AdmittedJob* job = book_.find(id);
  // Without a credential for it, a job that exists and one that does not look the same.
  if (job != nullptr && (is_operator || same_secret(presented, job->credential))) return *job;
  if (job == nullptr && is_operator) throw ControllerError(Kind::not_found, "no job " + std::to_string(id));
  throw ControllerError(Kind::denied, "job " + std::to_string(id) +
                                          ": needs the job's credential or the operator's");
}

grpc::Status ControllerService::GetFabric(grpc::ServerContext*, const v1::GetFabricRequest*,
                                          v1::Fabric* out) {
  return guarded("GetFabric", [&] {
    for (const auto& s : book_.fabric().switches()) {
      auto* info = out->add_switches();
      info->set_name(s.name);
      info->set_address(s.address.str());
      info->set_level(static_cast<std::uint32_t>(s.level));
      info->set_aggregators(s.aggregators);
      info->set_values_per_aggregator(s.values_per_aggregator);
      info->set_policy(engines::to_string(s.policy));
    }
    for (const auto& ps : book_.fabric().servers()) out->add_parameter_servers(ps.name);
  });
}

std::unique_lock<std::timed_mutex> ControllerService::lock_fabric(Time deadline) {
  std::unique_lock lock(fabric_mutex_, std::chrono::steady_clock::now() +
                                           std::chrono::nanoseconds(deadline - runtime::monotonic_now()));
  if (!lock.owns_lock())
    throw ControllerError(Kind::failed, "the fabric is busy: another call is still programming it");
  return lock;
}

grpc::Status ControllerService::AdmitJob(grpc::ServerContext* context,
                                         const v1::AdmitJobRequest* request, v1::Admission* out) {
  return guarded("AdmitJob", [&] {
    const Time deadline = runtime::monotonic_now() + kCallBudget;
    JobRequest wanted = request_of(*request);
    wanted.tenant = admitting_tenant(context);
    const auto fabric_lock = lock_fabric(deadline);  // nobody else records a job meanwhile
    AdmittedJob job = install_new_job(wanted, deadline);
    const std::uint32_t id = job.config.id;
    const auto cluster = book_.cluster_of(job);
    if (context->IsCancelled()) {  // nobody would ever use (or renew) it
      fabric_.uninstall(cluster, id, deadline);
      throw ControllerError(Kind::failed, "the client gave up before the job was admitted");
    }
    out->set_job_id(id);
    out->set_credential(job.credential);
    out->set_cluster_toml(book_.cluster_text(job));
    out->set_run(0);
    out->set_lease_seconds(static_cast<std::uint32_t>(job.lease / kSecond));
    {
      std::lock_guard lock(book_mutex_);
      book_.record(std::move(job));
      try {
        save();  // before the answer: an admitted job is never forgotten
      } catch (...) {
        book_.erase(id);
        fabric_.uninstall(cluster, id, deadline);
        throw;
      }
    }
    lend_homes(homes_now(), deadline, false);  // it grows over what is idle
    spdlog::info("controller: admitted job {} ('{}', {} workers)", id, request->name(),
                 request->workers_size());
  });
}

// Under fabric_mutex_. A PS that does not answer the admission in time is marked unresponsive
// and the job prepared again (on another PS, when the fabric has one) while the call has time
// for a PS's step: one stopped PS no longer fails every admission that picks it.
AdmittedJob ControllerService::install_new_job(const JobRequest& wanted, Time deadline) {
  for (;;) {
    AdmittedJob job = [&] {
      std::lock_guard lock(book_mutex_);
      return book_.prepare(wanted, runtime::monotonic_now());
    }();
    lend_homes(homes_now(&job), deadline, false);  // the lenders give its home back first
    try {
      fabric_.install(book_.cluster_of(job), job.config.id, control::job_toml(job.config), deadline);
      return job;
    } catch (const UnansweredDaemon& e) {
      const Time now = runtime::monotonic_now();
      if (!e.is_server || deadline - now < kServerStepBudget) throw;
      spdlog::warn("controller: {} did not answer job {}'s admission in time: passed over for "
                   "{} s, the job prepared again", e.daemon, job.config.id, kUnresponsiveFor / kSecond);
      std::lock_guard lock(book_mutex_);
      book_.mark_unresponsive(e.daemon, now + kUnresponsiveFor);
    }
  }
}

grpc::Status ControllerService::RenewLease(grpc::ServerContext* context, const v1::JobRef* ref,
                                           v1::Lease* out) {
  return guarded("RenewLease", [&] {
    std::lock_guard lock(book_mutex_);
    const AdmittedJob& job = job_for(context, ref->job_id());
    // The first renewal proves the tenant holds the credential: saved, so that a restart
    // never lets the job lapse as one nobody could renew.
    if (book_.renew(ref->job_id(), runtime::monotonic_now())) {
      try {
        save();
      } catch (...) {
        book_.unclaim(ref->job_id());  // the next renewal tries again
        throw;
      }
    }
    out->set_lease_seconds(static_cast<std::uint32_t>(job.lease / kSecond));
  });
}

grpc::Status ControllerService::GetJob(grpc::ServerContext* context, const v1::JobRef* ref,
                                       v1::JobStatus* out) {
  return guarded("GetJob", [&] {
    const Time deadline = runtime::monotonic_now() + kCallBudget;
    const AdmittedJob job = [&] {
      std::lock_guard lock(book_mutex_);
      return job_for(context, ref->job_id());
    }();
    fill_status(job, out);
    out->set_stats_json(fabric_.stats(book_.cluster_of(job), job.config.id, deadline).dump());
  });
}

grpc::Status ControllerService::RemoveJob(grpc::ServerContext* context, const v1::JobRef* ref,
                                          v1::Removed*) {
  return guarded("RemoveJob", [&] {
    const Time deadline = runtime::monotonic_now() + kCallBudget;
    {
      std::lock_guard lock(book_mutex_);
      job_for(context, ref->job_id());
    }
    const auto fabric_lock = lock_fabric(deadline);
    remove(ref->job_id(), "on request", deadline);
  });
}

grpc::Status ControllerService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                                         v1::JobList* out) {
  return guarded("ListJobs", [&] {
    require_operator(context);
    std::lock_guard lock(book_mutex_);
    for (std::uint32_t id : book_.ids()) fill_status(book_.at(id), out->add_jobs());
  });
}

void ControllerService::fill_status(const AdmittedJob& job, v1::JobStatus* out) const {
  out->set_job_id(job.config.id);
  out->set_name(job.name);
  for (const auto& w : job.config.workers) {
    auto* e = out->add_workers();
    e->set_rack(w.rack);
    e->set_address(w.address.str());
  }
  const Time now = runtime::monotonic_now();
  out->set_lease_seconds_left(job.lease_ends > now ? double(job.lease_ends - now) / kSecond : 0.0);
  const auto cluster = book_.cluster_of(job);
  for (const auto& d : FabricProgrammer::daemons_of(cluster, job.config.id)) {
    const bool is_ps = std::ranges::count(job.config.parameter_servers, d.name) > 0;
    (is_ps ? out->add_parameter_servers() : out->add_switches())->assign(d.name);
  }
}

// Under fabric_mutex_ (the book's own lock is taken here).
void ControllerService::remove(std::uint32_t id, const char* why, Time deadline) {
  control::ClusterConfig cluster = [&] {
    std::lock_guard lock(book_mutex_);
    const auto cluster = book_.cluster_of(book_.at(id));
    AdmittedJob job = *book_.erase(id);
    try {
      save();  // the state says "gone" before the daemons are told
    } catch (...) {
      book_.record(std::move(job));
      throw;
    }
    return cluster;
  }();
  fabric_.uninstall(cluster, id, deadline);
  homes_told_.erase(id);
  lend_homes(homes_now(), deadline, false);  // its home goes to the jobs next to it
  spdlog::info("controller: removed job {} ({})", id, why);
}

namespace {
// What a PS that may not have taken its last home is compared as: no home equals it.
constexpr control::Slice kHomeUnsure{~0u, 0};
constexpr Duration kHomeRequestBudget = 1 * kSecond;
}  // namespace

std::map<std::uint32_t, control::Slice> ControllerService::homes_now(const AdmittedJob* arriving) {
  std::lock_guard lock(book_mutex_);
  return book_.homes_to_plan_on(arriving, !options_.keep_homes);
}

// Each home request has a short budget of its own, and a PS that does not answer is not asked
// again in the same round: a stopped PS costs a call about a second, never its whole budget.
// Homes a PS did not take are told again only by the rounds that retry (reap, reconcile), so
// that an admission never waits on a stopped lender's PS.
void ControllerService::lend_homes(std::map<std::uint32_t, control::Slice> homes, Time deadline,
                                   bool retry_unsure) {
  struct Telling {
    std::uint32_t id;
    control::Slice home;
    control::ClusterConfig cluster;
  };
  std::vector<Telling> tell;
  {
    std::lock_guard lock(book_mutex_);
    for (const auto& [id, home] : homes) {
      const AdmittedJob* job = book_.find(id);
      if (job == nullptr) continue;  // the arriving job: not installed yet
      const auto told = homes_told_.find(id);
      if (told != homes_told_.end() && told->second == kHomeUnsure && !retry_unsure) continue;
      const control::Slice was = told != homes_told_.end()
                                     ? told->second
                                     : control::Slice{job->config.home_first, job->config.home_count};
      if (was != home) tell.push_back({id, home, book_.cluster_of(*job)});
    }
  }
  std::set<std::string> unanswered;
  for (const Telling& t : tell) {
    const Time budget = std::min(deadline, runtime::monotonic_now() + kHomeRequestBudget);
    homes_told_[t.id] =
        fabric_.set_home(t.cluster, t.id, t.home, budget, unanswered) ? t.home : kHomeUnsure;
  }
}

void ControllerService::reap(Time now) {
  const Time deadline = now + kCallBudget;
  std::unique_lock<std::timed_mutex> fabric_lock;
  try {
    fabric_lock = lock_fabric(deadline);
  } catch (const ControllerError&) {
    return;  // the next tick tries again
  }
  const auto expired = [&] {
    std::lock_guard lock(book_mutex_);
    return book_.expired(now);
  }();
  for (std::uint32_t id : expired) {
    try {
      remove(id, "its lease lapsed", deadline);
    } catch (const std::exception& e) {
      spdlog::error("controller: removing job {} after its lease: {}", id, e.what());
    }
  }
  lend_homes(homes_now(), deadline, true);  // homes a PS did not take before are told again
}

// Each daemon is asked what it holds once, with kCallBudget of its own: reconciling runs on the
// controller's own thread, and a stopped daemon costs it that time once, never another call's
// (the book is not locked while daemons are asked).
std::vector<std::string> ControllerService::reconcile() {
  std::unique_lock<std::timed_mutex> fabric_lock;
  try {
    fabric_lock = lock_fabric(runtime::monotonic_now() + kCallBudget);
  } catch (const ControllerError& e) {
    return {std::string("not reconciled: ") + e.what()};
  }
  const std::vector<AdmittedJob> jobs = [&] {
    std::lock_guard lock(book_mutex_);
    std::vector<AdmittedJob> out;
    for (std::uint32_t id : book_.ids()) out.push_back(book_.at(id));
    return out;
  }();
  auto budget = [] { return runtime::monotonic_now() + kCallBudget; };
  const auto daemons = FabricProgrammer::all_daemons(book_.fabric());
  std::map<std::string, std::optional<std::vector<std::uint32_t>>> held;
  for (const auto& d : daemons) held[d.name] = fabric_.listed(d, budget());
  std::vector<std::string> done;
  std::set<std::uint32_t> known;
  for (const AdmittedJob& job : jobs) {
    const std::uint32_t id = job.config.id;
    known.insert(id);
    for (const auto& d : FabricProgrammer::daemons_of(book_.cluster_of(job), id)) {
      const auto& jobs_there = held[d.name];
      if (!jobs_there || std::ranges::count(*jobs_there, id) > 0) continue;
      const std::string error = fabric_.install_on(d, id, control::job_toml(job.config), budget());
      homes_told_[id] = kHomeUnsure;  // put back with its own home
      done.push_back("job " + std::to_string(id) + (error.empty() ? " put back on " + d.name
                                                                  : " not put back on " + d.name + ": " + error));
    }
  }
  for (const auto& d : daemons)
    for (std::uint32_t id : held[d.name].value_or(std::vector<std::uint32_t>{}))
      if (!known.contains(id) && fabric_.remove_from(d, id, budget()))
        done.push_back("job " + std::to_string(id) + " (never answered) removed from " + d.name);
  // After a restart the PSs may plan on homes lent before it: every job is told its home once.
  if (!reconciled_once_)
    for (std::uint32_t id : known) homes_told_[id] = kHomeUnsure;
  reconciled_once_ = true;
  lend_homes(homes_now(), budget(), true);
  return done;
}

}  // namespace atp::controller
