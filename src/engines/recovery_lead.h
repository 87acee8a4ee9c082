#pragma once
// Who moves first when a seq's result is missing. Every worker of the job notices the same gap
// at about the same time, but one lost packet usually needs one resend: so one worker per seq
// (rotating over racks, then over ranks in the rack) resends at once, and the others wait a
// little for its result (engines.md §3.6). The PS names the same worker when it must ask a rack
// it has heard nothing from.
#include <cstdint>

namespace atp::engines {

inline std::uint32_t lead_rack(std::uint32_t seq, std::uint32_t job_fan_in) {
  return seq % job_fan_in;
}

// The rank within `rack_fan_in` workers that leads `seq` in its rack.
inline std::uint32_t lead_rank(std::uint32_t seq, std::uint32_t job_fan_in,
                               std::uint32_t rack_fan_in) {
  return (seq / job_fan_in) % rack_fan_in;
}

// Whether worker `rank` of rack `rack` (of `rack_fan_in`) leads `seq`'s recovery.
inline bool leads_recovery(std::uint32_t seq, std::uint32_t job_fan_in, std::uint32_t rack,
                           std::uint32_t rack_fan_in, std::uint32_t rank) {
  return lead_rack(seq, job_fan_in) == rack && lead_rank(seq, job_fan_in, rack_fan_in) == rank;
}

}  // namespace atp::engines
