#pragma once
// Why the controller refused a call (the gRPC service maps each kind to its status code), and
// what its clients and the service share.
#include <stdexcept>
#include <string>

namespace atp::controller {

struct ControllerError : std::runtime_error {
  enum class Kind {
    invalid,    // the request itself is wrong (INVALID_ARGUMENT)
    refused,    // well formed, but the fabric cannot take it now (RESOURCE_EXHAUSTED)
    not_found,  // no such job (NOT_FOUND)
    denied,     // missing or wrong credential (PERMISSION_DENIED)
    failed,     // a switch or PS did not answer as it should (UNAVAILABLE)
  };
  ControllerError(Kind k, const std::string& what) : std::runtime_error(what), kind(k) {}
  Kind kind;
};

// A daemon that gave no answer in time (rather than refusing): which one, and whether a PS,
// which an admission may replace by another.
struct UnansweredDaemon : ControllerError {
  UnansweredDaemon(std::string name, bool server, const std::string& what)
      : ControllerError(Kind::failed, what), daemon(std::move(name)), is_server(server) {}
  std::string daemon;
  bool is_server;
};

// Metadata key of every call's credential.
inline constexpr char kCredentialKey[] = "atp-credential";
// Largest request the controller reads (an admission of 1024 workers is about 40 KiB).
inline constexpr int kMaxRequestBytes = 256 << 10;

}  // namespace atp::controller
