#include "proto/header.h"

#include "proto/byte_order.h"

namespace atp::proto {

std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::ok: return "ok";
    case DecodeError::too_short: return "packet shorter than the ATP header";
    case DecodeError::bad_version: return "unsupported ATP version";
    case DecodeError::bad_length: return "packet length does not match value_count";
    case DecodeError::too_many_values: return "value_count above the maximum";
    case DecodeError::bad_level: return "next_level is not 0, 1 or 2";
    case DecodeError::bad_fan_in: return "fan-in is 0 or above 32";
    case DecodeError::bad_rack: return "rack index not below the job's rack count";
    case DecodeError::bad_bitmap: return "bitmap has bits beyond the fan-in or names no contributor";
    case DecodeError::bad_flags: return "contradictory flags";
    case DecodeError::bad_kind: return "kind is not 0, 1, 2 or 3";
    case DecodeError::results_behind_off_result:
      return "results_behind set without the result flag";
  }
  return "unknown decode error";
}

FragmentTemplate::FragmentTemplate(const Header& fixed) { encode(fixed, bytes_); }

void encode(const Header& h, std::span<std::uint8_t> out) {
  std::uint8_t* p = out.data();
  p[offset::version] = kVersion;
  p[offset::ps_index] = h.ps_index;
  store_be32(p + offset::job, h.job);
  store_be32(p + offset::tensor, h.tensor);
  store_be32(p + offset::seq, h.seq);
  store_be32(p + offset::aggregator, h.aggregator);
  p[offset::rack_fan_in] = h.rack_fan_in;
  p[offset::job_fan_in] = h.job_fan_in;
  p[offset::rack] = h.rack;
  p[offset::kind] = static_cast<std::uint8_t>(h.kind);
  store_be16(p + offset::value_count, h.value_count);
  store_be16(p + offset::results_behind, h.results_behind);
  store_be32(p + offset::remap_index, h.remap_index);
  store_be32(p + offset::token, h.token);
  encode_flags_and_bitmaps(h, out);
}

void encode_flags_and_bitmaps(const Header& h, std::span<std::uint8_t> packet) {
  std::uint8_t* p = packet.data();
  p[offset::flags] = h.flags;
  p[offset::next_level] = static_cast<std::uint8_t>(h.next_level);
  store_be32(p + offset::workers_bitmap, h.workers_bitmap);
  store_be32(p + offset::racks_bitmap, h.racks_bitmap);
}

bool mark_ecn(std::span<std::uint8_t> packet) {
  Header h;
  if (decode(packet, h) != DecodeError::ok || h.kind != Kind::fragment) return false;
  h.set(flag::kEcn);
  encode_flags_and_bitmaps(h, packet);
  return true;
}

}  // namespace atp::proto
