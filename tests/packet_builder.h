#pragma once
// Test helpers: build ATP packets field by field and read them back.
#include <cstdint>
#include <vector>

#include "proto/byte_order.h"
#include "proto/header.h"

namespace atp::testing {

struct PacketSpec {
  proto::Kind kind = proto::Kind::fragment;
  std::uint32_t job = 1, tensor = 0, seq = 0, aggregator = 5;
  std::uint8_t flags = 0, ps_index = 0;
  proto::Level level = proto::Level::rack;
  std::uint8_t rack = 0, rack_fan_in = 2, job_fan_in = 1;
  std::uint32_t workers = 1, racks = 0;  // bitmaps
  std::vector<std::int32_t> values = {1, 2, 3};
  std::uint32_t token = 0;
  std::uint32_t remap_index = 0;
};

inline std::vector<std::uint8_t> make_packet(const PacketSpec& s) {
  proto::Header h;
  h.kind = s.kind;
  h.flags = s.flags;
  h.next_level = s.level;
  h.ps_index = s.ps_index;
  h.job = s.job;
  h.tensor = s.tensor;
  h.seq = s.seq;
  h.aggregator = s.aggregator;
  h.workers_bitmap = s.workers;
  h.racks_bitmap = s.racks;
  h.rack_fan_in = s.rack_fan_in;
  h.job_fan_in = s.job_fan_in;
  h.rack = s.rack;
  h.value_count = static_cast<std::uint16_t>(s.values.size());
  h.token = s.token;
  h.remap_index = s.remap_index;
  std::vector<std::uint8_t> p(h.packet_bytes());
  proto::encode(h, p);
  for (std::size_t i = 0; i < s.values.size(); ++i)
    proto::store_be_i32(p.data() + proto::kHeaderBytes + 4 * i, s.values[i]);
  return p;
}

inline proto::Header header_of(const std::vector<std::uint8_t>& p) {
  proto::Header h;
  if (proto::decode(p, h) != proto::DecodeError::ok) throw std::runtime_error("bad packet");
  return h;
}

inline std::vector<std::int32_t> values_of(const std::vector<std::uint8_t>& p) {
  std::vector<std::int32_t> v((p.size() - proto::kHeaderBytes) / 4);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = proto::load_be_i32(p.data() + proto::kHeaderBytes + 4 * i);
  return v;
}

}  // namespace atp::testing
