// The header decoder on arbitrary bytes: it must refuse or accept without reading out of bounds,
// and whatever it accepts must encode back to the very same bytes (one canonical form, so a
// switch that rewrites a header in place never changes a field it did not mean to).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "proto/header.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace atp::proto;
  Header h;
  if (decode({data, size}, h) != DecodeError::ok) return 0;
  if (size != h.packet_bytes()) std::abort();  // accepted a length that disagrees with the count

  std::vector<std::uint8_t> again(data, data + size);
  std::memset(again.data(), 0, kHeaderBytes);
  encode(h, again);
  if (std::memcmp(again.data(), data, kHeaderBytes) != 0) std::abort();

  // The switch's in-place rewrite of the mutable fields must also be lossless.
  encode_flags_and_bitmaps(h, again);
  Header twice;
  if (decode(again, twice) != DecodeError::ok) std::abort();
  if (std::memcmp(again.data(), data, kHeaderBytes) != 0) std::abort();
  return 0;
}
