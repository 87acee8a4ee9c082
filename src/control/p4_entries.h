#pragma once
// What the P4 programs' control plane installs, derived from the same SwitchConfig and
// SwitchJob entries the software switch takes (docs/p4.md, "Control plane"):
//  - BMv2: simple_switch_CLI commands for p4/v1model/atp.p4.
// The P4 programs need a power-of-two pool and static slices; the functions throw
// std::invalid_argument naming what does not fit.
#include <string>
#include <vector>

#include "engines/switch/switch_tables.h"

namespace atp::control {

struct P4Limits {
  std::uint32_t pool = 4096;         // ATP_POOL
  std::uint32_t values = 256;        // ATP_LANES x passes
  std::uint32_t ports = 512;         // 9-bit port numbers
};

// The profile: level, pool mask, K, policy. (stale_after is the control plane's: it writes the
// claim epoch, register AtpIngress.claim_epoch, every stale_after / 2.)
std::vector<std::string> bmv2_profile(const engines::SwitchConfig& config,
                                      const P4Limits& limits = {});
// One job's table entries and multicast group. The group's node is associated by handle
// `node_handle` (BMv2 numbers nodes 0, 1, ... in creation order on a fresh switch).
std::vector<std::string> bmv2_job(const engines::SwitchJob& job, unsigned node_handle,
                                  const P4Limits& limits = {});

}  // namespace atp::control
