#pragma once
// Big-endian (network order) loads and stores on unaligned byte buffers.
#include <cstdint>
#include <cstring>

namespace atp::proto {

inline std::uint32_t bswap(std::uint32_t v) { return __builtin_bswap32(v); }
inline std::uint16_t bswap(std::uint16_t v) { return __builtin_bswap16(v); }

inline std::uint32_t load_be32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return bswap(v);
}
inline std::uint16_t load_be16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return bswap(v);
}
inline void store_be32(std::uint8_t* p, std::uint32_t v) {
  v = bswap(v);
  std::memcpy(p, &v, sizeof v);
}
inline void store_be16(std::uint8_t* p, std::uint16_t v) {
  v = bswap(v);
  std::memcpy(p, &v, sizeof v);
}
inline std::int32_t load_be_i32(const std::uint8_t* p) {
  return static_cast<std::int32_t>(load_be32(p));
}
inline void store_be_i32(std::uint8_t* p, std::int32_t v) {
  store_be32(p, static_cast<std::uint32_t>(v));
}

}  // namespace atp::proto
