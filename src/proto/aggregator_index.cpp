#include "proto/aggregator_index.h"

#include "proto/byte_order.h"
#include "proto/crc32.h"

namespace atp::proto {

std::uint32_t aggregator_hash(std::uint32_t job, std::uint32_t slot) {
  std::uint8_t key[8];
  store_be32(key, job);
  store_be32(key + 4, slot);
  return crc32(key, sizeof key);
}

}  // namespace atp::proto
