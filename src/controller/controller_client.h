#pragma once
// A blocking client of the controller (controller.proto), for `atp job` and the
// torch.distributed backend. Every call throws ControllerCallError with the controller's
// reason when it fails.
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "controller/controller.grpc.pb.h"
#include "controller/job_terms.h"

namespace atp::controller {

struct ControllerCallError : std::runtime_error {
  ControllerCallError(grpc::StatusCode c, const std::string& what) : std::runtime_error(what), code(c) {}
  grpc::StatusCode code;
};

class ControllerClient {
 public:
  // `address`: host:port. `credential`: sent with every call (a job's, the operator's, or the
  // admission credential), may be empty. `tls_ca_file`: the PEM certificate(s) that signed the
  // controller's: the channel is TLS and the controller's name is checked; empty: plaintext.
  explicit ControllerClient(const std::string& address, std::string credential = {},
                            const std::string& tls_ca_file = {},
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));

  void set_credential(std::string credential) { credential_ = std::move(credential); }
  v1::Fabric fabric();
  v1::Admission admit(const v1::AdmitJobRequest& request);
  v1::Lease renew(std::uint32_t job);
  v1::JobStatus job(std::uint32_t job);
  void remove(std::uint32_t job);
  v1::JobList list();

 private:
  template <typename Call>
  void call(const char* what, Call&& body);

  std::string address_, credential_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<v1::Controller::Stub> stub_;
};

// The terms into a request, and out of one.
void set_terms(v1::AdmitJobRequest& request, const JobTerms& terms);
JobTerms terms_of(const v1::AdmitJobRequest& request);

// The whole of a (PEM) file; throws std::invalid_argument naming it.
std::string read_pem(const std::string& path);

// The name of a gRPC status code, as the tools print it ("NOT_FOUND").
std::string code_name(grpc::StatusCode code);

}  // namespace atp::controller
