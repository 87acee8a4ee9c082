#pragma once
// The controller's gRPC service (controller.proto): admission, leases, removal and listing over
// a JobBook, with the fabric programmed through a FabricProgrammer. Two locks: book_mutex_
// guards the book and is never held while a daemon is asked anything, so renewals, listings and
// lookups never wait on the network; fabric_mutex_ serialises the calls that change the fabric
// (admission, removal, lease expiry, reconciling), each within kCallBudget: a call that cannot
// get it, or a daemon that does not answer, in that time gets UNAVAILABLE.
#include <mutex>
#include <string>

#include "controller/controller.grpc.pb.h"
#include "controller/fabric_programmer.h"
#include "controller/job_book.h"

namespace atp::controller {

struct ServiceOptions {
  std::string state_path;           // durable state; empty: none (jobs die with the controller)
  std::string operator_credential;  // empty: administrative calls are refused
  std::string admit_credential;     // empty: anyone who reaches the controller may admit
  std::string daemon_secret;        // sent to daemons controlled over TCP
  // Each admits with its own credential, its jobs counted against its quota (JobBook's
  // Limits::quotas). With tenants and no admit_credential, only tenants may admit.
  std::vector<Tenant> tenants;
  // Every job plans on its own home only; by default the idle blocks of the pool are lent to
  // the jobs next to them (JobBook::homes_to_plan_on).
  bool keep_homes = false;
};

// This moment on the monotonic and the wall clock (JobBook::save and load).
Instant instant_now();

class ControllerService final : public v1::Controller::Service {
 public:
  static constexpr Duration kCallBudget = 5 * kSecond;
  // How long admissions pass over a PS that did not answer one (JobBook::mark_unresponsive).
  static constexpr Duration kUnresponsiveFor = 30 * kSecond;

  ControllerService(JobBook book, ServiceOptions options);

  // After a restart: every recovered job is put back on the daemons that lost it (they were
  // restarted too), and jobs the daemons hold that the state does not know (admitted but never
  // answered when the controller died) are removed. Returns what it did, for the log.
  std::vector<std::string> reconcile();
  // Removes the jobs whose lease lapsed; the caller calls it about once a second.
  void reap(Time now);

  grpc::Status GetFabric(grpc::ServerContext*, const v1::GetFabricRequest*, v1::Fabric*) override;
  grpc::Status AdmitJob(grpc::ServerContext*, const v1::AdmitJobRequest*, v1::Admission*) override;
  grpc::Status RenewLease(grpc::ServerContext*, const v1::JobRef*, v1::Lease*) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::JobRef*, v1::JobStatus*) override;
  grpc::Status RemoveJob(grpc::ServerContext*, const v1::JobRef*, v1::Removed*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::JobList*) override;

 private:
  void require_operator(grpc::ServerContext* context) const;
  std::string admitting_tenant(grpc::ServerContext* context) const;
  // The job, if the caller holds its credential or the operator's.
  const AdmittedJob& job_for(grpc::ServerContext* context, std::uint32_t id) const;
  // Takes fabric_mutex_ by `deadline`, or throws ControllerError (failed).
  std::unique_lock<std::timed_mutex> lock_fabric(Time deadline);
  void remove(std::uint32_t id, const char* why, Time deadline);
  AdmittedJob install_new_job(const JobRequest& wanted, Time deadline);
  // Everything but the daemons' counters (which GetJob adds).
  void fill_status(const AdmittedJob& job, v1::JobStatus* out) const;
  void save() const;
  // Tells the PSs of every job whose home to plan on differs from what they last took; under
  // fabric_mutex_. A home not taken is told again by a call with `retry_unsure`.
  void lend_homes(std::map<std::uint32_t, control::Slice> homes, Time deadline, bool retry_unsure);
  // JobBook::homes_to_plan_on under the book's lock (own homes only with keep_homes).
  std::map<std::uint32_t, control::Slice> homes_now(const AdmittedJob* arriving = nullptr);

  std::mutex book_mutex_;
  std::timed_mutex fabric_mutex_;
  JobBook book_;
  FabricProgrammer fabric_;
  ServiceOptions options_;
  // Per job, the home its PSs last took (absent: the one its TOML gave; under fabric_mutex_).
  std::map<std::uint32_t, control::Slice> homes_told_;
  bool reconciled_once_ = false;  // (under fabric_mutex_)
};

}  // namespace atp::controller
