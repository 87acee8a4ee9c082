#pragma once
// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320): the hash Tofino's Hash extern
// computes as CRC32, so switches and workers agree on aggregator indices.
#include <cstddef>
#include <cstdint>

namespace atp::proto {

std::uint32_t crc32(const std::uint8_t* data, std::size_t size);

}  // namespace atp::proto
