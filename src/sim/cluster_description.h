#pragma once
// The simulated cluster as the control plane describes a real one (control::ClusterConfig), so
// the simulator installs exactly the entries the daemons and libatp derive from a cluster file:
// one derivation for both. Racks "rack<r>" under one level-2 switch "spine", every job with its
// own parameter servers "ps<j>-<p>", and made-up addresses that name each node.
#include <cstdint>
#include <string>

#include "control/cluster_config.h"
#include "sim/cluster.h"

namespace atp::sim {

std::string rack_name(std::size_t rack);
inline const std::string kSpineName = "spine";
std::string server_name(std::uint32_t job, unsigned shard);

// The addresses the description gives each node (10.<kind>.x.y, port 9999).
runtime::Endpoint rack_address(std::size_t rack);
runtime::Endpoint spine_address();
runtime::Endpoint server_address(std::uint32_t job, unsigned shard);
runtime::Endpoint worker_address(std::uint32_t job, std::uint32_t rank);
runtime::Endpoint control_address();

// What a launch of job j draws from the seed, in this order: the job's token, then one join
// nonce per worker rank.
std::uint32_t job_token(std::uint64_t seed, std::uint32_t job);
std::uint32_t join_nonce(std::uint64_t seed, std::uint32_t job, std::uint32_t rank);

// Throws std::invalid_argument as ClusterConfig::parse would.
control::ClusterConfig describe(const ClusterSpec& spec);

}  // namespace atp::sim
