#pragma once
// The controller's state: the fabric it owns and the jobs it admitted, with their ids, tokens,
// credentials and leases. Pure bookkeeping (no I/O but save/load), so admission rules are unit
// tested without daemons. Ids, wire tokens and multicast groups (one per job id) all come from
// here, and a job id is not handed out again while any job holds it: admitting a job never
// touches a running job's entry, and every admission is a fresh job with a fresh token, so no
// launch ever meets what an earlier launch left in a switch or PS (docs/controller.md).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "control/cluster_config.h"
#include "control/slice_allocator.h"
#include "controller/controller_error.h"
#include "controller/job_terms.h"
#include "controller/tenants.h"
#include "engines/common.h"

namespace atp::controller {

// What a tenant asks for; zeros pick defaults (controller.proto documents each field).
struct JobRequest {
  std::string name;
  std::string tenant;  // who admits it (the credential it came with); empty: no tenant
  std::vector<control::WorkerSpec> workers;
  JobTerms terms;
};

struct AdmittedJob {
  control::JobConfig config;
  std::string name;
  std::string credential;  // 128 random bits, hex
  std::string tenant;      // empty: admitted with the controller's admission credential
  // Bytes on all its PSs at its worst (ParameterServer::memory_bound), for its tenant's quota.
  std::uint64_t ps_memory = 0;
  // The ATP switch threads its home indexes (switch index << 32 | thread): two jobs' homes
  // must differ where these meet (JobBook::assign_home).
  std::vector<std::uint64_t> home_threads;
  Duration lease = 0;
  Time lease_ends = 0;  // monotonic
  // Renewed at least once: its tenant holds the credential. A job saved before its admission
  // was answered (the controller killed in between) never is, and nobody can renew it.
  bool claimed = false;
  bool restart_grace_used = false;  // unclaimed, it outlived its lease across a restart once
};

// Now on both clocks: leases run on the monotonic one, and the wall clock carries a lease
// across a controller restart.
struct Instant {
  Time monotonic = 0;
  std::int64_t unix_ms = 0;
};

struct Limits {
  Duration default_lease = 30 * kSecond;
  Duration max_lease = 3600 * kSecond;
  std::size_t max_jobs = 1024;
  std::size_t max_workers = 1024;
  std::uint32_t static_share = 4;  // a job naming no static slice gets 1/this of a switch thread
  // A job's window sizes the state each of its PSs allocates at admission (per seq of the ring,
  // K values each): 2^20 took ~730 MB and stalled the PS's packet loop for seconds.
  std::uint32_t max_window = 4096;
  std::map<std::string, Quota> quotas = {};  // per tenant (a fabric's [[tenant]] tables)
};

class JobBook {
 public:
  // `fabric_text`: a cluster file with switches and PSs and no jobs (the controller owns them).
  JobBook(std::string fabric_text, const std::string& origin, Limits limits = {});

  // The job the request describes, with a fresh id, token and credential, checked against the
  // fabric; nothing is recorded until record(). Throws ControllerError.
  AdmittedJob prepare(const JobRequest& request, Time now) const;
  void record(AdmittedJob job);
  std::optional<AdmittedJob> erase(std::uint32_t id);
  const AdmittedJob* find(std::uint32_t id) const;
  // Throws ControllerError (not_found).
  const AdmittedJob& at(std::uint32_t id) const;
  // Returns whether this renewal claimed the job (its first): the state should be saved.
  bool renew(std::uint32_t id, Time now);
  // Undoes a claim whose saving failed, so that the next renewal saves it again.
  void unclaim(std::uint32_t id);
  std::vector<std::uint32_t> expired(Time now) const;
  std::vector<std::uint32_t> ids() const;
  // A PS that did not answer an admission in time: until `until`, admissions pick it only
  // when the healthy PSs are too few for the job.
  void mark_unresponsive(const std::string& server, Time until);

  // Each planned job's home to plan on now (control/home_lending.h, lend_idle_pool): its own,
  // grown over the blocks of its pools that no admitted job's home holds, up to its window, on
  // every ATP switch thread its sums cross. A job that borrows keeps its own. `arriving`
  // counts as admitted (the homes to shrink before it is installed). `lend` false: each job's
  // own home (what a controller that keeps homes tells the PSs after a restart).
  std::map<std::uint32_t, control::Slice> homes_to_plan_on(const AdmittedJob* arriving = nullptr,
                                                           bool lend = true) const;

  const control::ClusterConfig& fabric() const { return fabric_; }
  // The fabric with this one job: what its switches, PSs and workers derive their entries from.
  control::ClusterConfig cluster_of(const AdmittedJob& job) const;
  // The same as cluster file text: the fabric file followed by the job's [[job]] table.
  std::string cluster_text(const AdmittedJob& job) const;

  // Durable state: written to a temporary file and renamed over `path` (mode 0600: it holds
  // credentials). load() restores the jobs: a claimed job with a fresh lease from `now` (its
  // tenant could not renew while the controller was down), an unclaimed one only with what
  // was left of its lease when saved, less the time since, so it lapses whatever the restarts.
  void save(const std::string& path, Instant now) const;
  void load(const std::string& path, Instant now);

 private:
  std::uint32_t next_free_id() const;
  std::vector<std::string> pick_servers(std::uint32_t count, Time now) const;
  std::uint16_t default_values_per_packet(const JobRequest& request) const;
  void assign_home(AdmittedJob& job) const;
  Duration restored_lease(AdmittedJob& job, const nlohmann::json& saved, Instant now) const;
  std::vector<std::uint64_t> home_threads_of(const control::JobConfig& job) const;
  std::vector<std::uint64_t> thread_keys(const std::vector<const control::SwitchSpec*>& switches,
                                         std::uint32_t id) const;
  void check_quota(const AdmittedJob& job) const;
  std::uint64_t ps_memory_of(const AdmittedJob& job) const;
  Duration lease_of(std::uint32_t seconds) const;

  std::string fabric_text_;
  control::ClusterConfig fabric_;
  Limits limits_;
  std::map<std::uint32_t, AdmittedJob> jobs_;
  std::map<std::string, std::size_t> server_load_;  // jobs per parameter server
  std::map<std::string, Time> unresponsive_until_;   // mark_unresponsive
  std::uint32_t next_id_ = 1;  // ids go round 1..kMaxSwitchJobId, skipping held ones
};

// `bits` random bits as lowercase hex, from the OS's generator.
std::string random_hex(unsigned bits);

}  // namespace atp::controller
