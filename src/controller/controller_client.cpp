#include "controller/controller_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "controller/controller_error.h"

namespace atp::controller {

std::string code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    default: return "code " + std::to_string(static_cast<int>(code));
  }
}

std::string read_pem(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().find("-----BEGIN") == std::string::npos)
    throw std::invalid_argument(path + ": not a readable PEM file");
  return text.str();
}

void set_terms(v1::AdmitJobRequest& r, const JobTerms& t) {
  r.set_values_per_packet(t.values_per_packet);
  r.set_window(t.window);
  r.set_parameter_servers(t.parameter_servers);
  r.set_max_gradient(t.max_gradient);
  r.set_lease_seconds(t.lease_seconds);
  r.set_deadline_ms(t.deadline_ms);
  r.set_static_aggregators(t.static_aggregators);
  r.set_aggregator_window(t.aggregator_window);
}

JobTerms terms_of(const v1::AdmitJobRequest& r) {
  return {r.values_per_packet(), r.window(),      r.parameter_servers(),  r.max_gradient(),
          r.lease_seconds(),     r.deadline_ms(), r.static_aggregators(), r.aggregator_window()};
}

namespace {
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const std::string& ca_file) {
  if (ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read_pem(ca_file);
  return grpc::SslCredentials(options);
}
}  // namespace

ControllerClient::ControllerClient(const std::string& address, std::string credential,
                                   const std::string& tls_ca_file, std::chrono::milliseconds timeout)
    : address_(address), credential_(std::move(credential)), timeout_(timeout),
      stub_(v1::Controller::NewStub(grpc::CreateChannel(address, channel_credentials(tls_ca_file)))) {}

template <typename Call>
void ControllerClient::call(const char* what, Call&& body) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  if (!credential_.empty()) context.AddMetadata(kCredentialKey, credential_);
  const grpc::Status status = body(context);
  if (!status.ok())
    throw ControllerCallError(status.error_code(), std::string("controller ") + address_ + ": " +
                                                       what + ": " + code_name(status.error_code()) +
                                                       ": " + status.error_message());
}

v1::Fabric ControllerClient::fabric() {
  const v1::GetFabricRequest request;
  v1::Fabric out;
  call("GetFabric", [&](grpc::ClientContext& c) { return stub_->GetFabric(&c, request, &out); });
  return out;
}

v1::Admission ControllerClient::admit(const v1::AdmitJobRequest& request) {
  v1::Admission out;
  call("AdmitJob", [&](grpc::ClientContext& c) { return stub_->AdmitJob(&c, request, &out); });
  return out;
}

v1::Lease ControllerClient::renew(std::uint32_t job) {
  v1::JobRef ref;
  ref.set_job_id(job);
  v1::Lease out;
  call("RenewLease", [&](grpc::ClientContext& c) { return stub_->RenewLease(&c, ref, &out); });
  return out;
}

v1::JobStatus ControllerClient::job(std::uint32_t job) {
  v1::JobRef ref;
  ref.set_job_id(job);
  v1::JobStatus out;
  call("GetJob", [&](grpc::ClientContext& c) { return stub_->GetJob(&c, ref, &out); });
  return out;
}

void ControllerClient::remove(std::uint32_t job) {
  v1::JobRef ref;
  ref.set_job_id(job);
  v1::Removed out;
  call("RemoveJob", [&](grpc::ClientContext& c) { return stub_->RemoveJob(&c, ref, &out); });
}

v1::JobList ControllerClient::list() {
  const v1::ListJobsRequest request;
  v1::JobList out;
  call("ListJobs", [&](grpc::ClientContext& c) { return stub_->ListJobs(&c, request, &out); });
  return out;
}

}  // namespace atp::controller
