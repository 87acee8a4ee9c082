#pragma once
// Which aggregator a fragment uses: CRC32 over (job, slot), each as 4 big-endian bytes,
// slot = seq mod window. The result is a 32-bit value; each switch takes it modulo its own
// pool size, so a job touches at most `window` aggregators per switch.
#include <cstdint>

namespace atp::proto {

std::uint32_t aggregator_hash(std::uint32_t job, std::uint32_t slot);

}  // namespace atp::proto
