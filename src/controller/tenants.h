#pragma once
// The tenants of a fabric: who may admit jobs, and how much each may hold at once. A fabric
// file's [[tenant]] tables name them (docs/controller.md, "Tenants and quotas").
#include <cstdint>
#include <string>
#include <vector>

namespace atp::controller {

// What one tenant's jobs may hold together; 0: no limit of that kind.
struct Quota {
  std::uint32_t max_jobs = 0;
  std::uint64_t max_aggregators = 0;   // summed over its jobs: ATP homes and static slices
  std::uint64_t max_ps_memory_mb = 0;  // summed over its jobs' PSs, each job at its worst
};

struct Tenant {
  std::string name;
  std::string credential_file;  // its first line is the tenant's admission credential
  std::string credential;       // read from credential_file by whoever starts the controller
  Quota quota;
};

// The fabric's [[tenant]] tables (none: no tenants). Throws std::invalid_argument naming the
// file and the problem.
std::vector<Tenant> parse_tenants(const std::string& fabric_text, const std::string& origin);
// The fabric as every admitted job's cluster file carries it: without its [[tenant]] tables,
// which name the other tenants, their quotas and where their credentials live.
std::string without_tenants(const std::string& fabric_text, const std::string& origin);
// Throws std::invalid_argument if two of the tenants' credentials, the admission credential
// and the operator's are the same (an admission would be charged to the wrong tenant, or
// carry the operator's powers). Empty credentials are not compared.
void require_distinct_credentials(const std::vector<Tenant>& tenants, const std::string& admit,
                                  const std::string& operator_credential);

}  // namespace atp::controller
