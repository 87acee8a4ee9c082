#pragma once
// decode(), defined inline: it runs for every packet in the switch, the PS and the worker, and
// inlined its callers skip the call and the stores of fields they never read.
// Included by proto/header.h; not meant to be included alone.
#include <bit>
#include <cstdint>
#include <span>

#include "proto/byte_order.h"

namespace atp::proto {

namespace detail {

// A handshake packet or a result query carries no flags and no values, and names exactly one
// worker.
inline DecodeError validate_handshake(const Header& h) {
  if (h.flags != 0) return DecodeError::bad_flags;
  if (h.value_count != 0) return DecodeError::bad_length;
  if (h.racks_bitmap != 0 || std::popcount(h.workers_bitmap) != 1) return DecodeError::bad_bitmap;
  return DecodeError::ok;
}

inline DecodeError validate_flags(const Header& h) {
  const bool result = h.has(flag::kResult);
  const bool float_request = h.has(flag::kFloatRequest);
  if (result && float_request) return DecodeError::bad_flags;
  // A result may say that its seq met a busy aggregator (the PS copies `collision` into it);
  // a float request may not, and nothing downward is a resend.
  if (h.is_downward() && (h.has(flag::kResend) || (h.has(flag::kCollision) && !result)))
    return DecodeError::bad_flags;
  if (h.has(flag::kWrapped) && h.has(flag::kFloatPayload)) return DecodeError::bad_flags;
  if (h.has(flag::kRemap) && !result) return DecodeError::bad_flags;
  return DecodeError::ok;
}

// A result names no worker (every worker's) or exactly one (Header::is_addressed_result).
inline DecodeError validate_addressee(const Header& h) {
  if (h.is_addressed_result() && std::popcount(h.workers_bitmap) != 1) return DecodeError::bad_bitmap;
  return DecodeError::ok;
}

inline DecodeError validate_contributors(const Header& h) {
  if (h.rack_fan_in == 0 || h.rack_fan_in > kMaxFanIn || h.job_fan_in == 0 ||
      h.job_fan_in > kMaxFanIn)
    return DecodeError::bad_fan_in;
  if (h.rack >= h.job_fan_in) return DecodeError::bad_rack;
  // No bit at or above the fan-in (1..32 here, so the 64-bit shifts are defined).
  if ((std::uint64_t{h.workers_bitmap} >> h.rack_fan_in) != 0 ||
      (std::uint64_t{h.racks_bitmap} >> h.job_fan_in) != 0)
    return DecodeError::bad_bitmap;
  if (h.is_downward()) return DecodeError::ok;
  // An upward packet names at least one contributor, and never both a whole rack and a
  // part of that same rack.
  if (h.workers_bitmap == 0 && h.racks_bitmap == 0) return DecodeError::bad_bitmap;
  if (h.workers_bitmap != 0 && (h.racks_bitmap & (1u << h.rack)) != 0)
    return DecodeError::bad_bitmap;
  return DecodeError::ok;
}

}  // namespace detail

inline DecodeError decode(std::span<const std::uint8_t> packet, Header& h) {
  if (packet.size() < kHeaderBytes) return DecodeError::too_short;
  const std::uint8_t* p = packet.data();
  if (p[offset::version] != kVersion) return DecodeError::bad_version;
  // Only a result says which earlier results its PS had sent (Header::results_behind).
  h.results_behind = load_be16(p + offset::results_behind);
  // (A handshake or query with the flag fails later: those carry no flags.)
  if (h.results_behind != 0 && (p[offset::flags] & flag::kResult) == 0)
    return DecodeError::results_behind_off_result;
  if (p[offset::kind] > static_cast<std::uint8_t>(Kind::query)) return DecodeError::bad_kind;
  h.kind = static_cast<Kind>(p[offset::kind]);

  h.value_count = load_be16(p + offset::value_count);
  if (h.value_count > kMaxValues) return DecodeError::too_many_values;
  if (packet.size() != h.packet_bytes()) return DecodeError::bad_length;

  const std::uint8_t level = p[offset::next_level];
  if (level > static_cast<std::uint8_t>(Level::spine)) return DecodeError::bad_level;
  h.next_level = static_cast<Level>(level);
  h.flags = p[offset::flags];
  h.ps_index = p[offset::ps_index];
  h.job = load_be32(p + offset::job);
  h.tensor = load_be32(p + offset::tensor);
  h.seq = load_be32(p + offset::seq);
  h.aggregator = load_be32(p + offset::aggregator);
  h.workers_bitmap = load_be32(p + offset::workers_bitmap);
  h.racks_bitmap = load_be32(p + offset::racks_bitmap);
  h.rack_fan_in = p[offset::rack_fan_in];
  h.job_fan_in = p[offset::job_fan_in];
  h.rack = p[offset::rack];
  h.remap_index = load_be32(p + offset::remap_index);
  h.token = load_be32(p + offset::token);

  if (h.kind != Kind::fragment) {
    if (auto e = detail::validate_handshake(h); e != DecodeError::ok) return e;
    return detail::validate_contributors(h);
  }
  if (auto e = detail::validate_flags(h); e != DecodeError::ok) return e;
  if (auto e = detail::validate_addressee(h); e != DecodeError::ok) return e;
  if (!h.is_downward() && h.value_count == 0) return DecodeError::bad_length;
  return detail::validate_contributors(h);
}

}  // namespace atp::proto
