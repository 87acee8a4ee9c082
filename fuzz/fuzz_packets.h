#pragma once
// Shared by the engine fuzzers: turns fuzz input into ATP packets that get past the decoder
// most of the time (so the engines' rules are exercised, not only the parser), with a raw
// byte string now and then for everything the decoder must refuse.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <vector>

#include "proto/byte_order.h"
#include "proto/header.h"

namespace atp::fuzzing {

// Field values drawn from small ranges, so packets of a few jobs, seqs and aggregators meet.
struct PacketRanges {
  std::uint32_t jobs = 3;          // job ids 1..jobs (0 and unknown ids now and then)
  std::uint32_t seqs = 16;
  std::uint32_t aggregators = 16;
  std::uint16_t max_values = 8;
};

inline std::vector<std::uint8_t> next_packet(FuzzedDataProvider& in, const PacketRanges& r,
                                             const std::vector<std::uint32_t>& tokens) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0)
    return in.ConsumeBytes<std::uint8_t>(in.ConsumeIntegralInRange<std::size_t>(0, 96));
  proto::Header h;
  h.flags = in.ConsumeIntegral<std::uint8_t>();
  h.next_level = static_cast<proto::Level>(in.ConsumeIntegralInRange<int>(0, 2));
  h.ps_index = in.ConsumeIntegralInRange<std::uint8_t>(0, 2);
  h.job = in.ConsumeIntegralInRange<std::uint32_t>(0, r.jobs + 1);
  h.tensor = proto::wire_tensor(in.ConsumeIntegralInRange<std::uint16_t>(0, 2),
                                in.ConsumeIntegralInRange<std::uint32_t>(0, 2));
  h.seq = in.ConsumeIntegralInRange<std::uint32_t>(0, r.seqs - 1);
  h.aggregator = in.ConsumeIntegralInRange<std::uint32_t>(0, r.aggregators - 1);
  h.rack_fan_in = in.ConsumeIntegralInRange<std::uint8_t>(1, 4);
  h.job_fan_in = in.ConsumeIntegralInRange<std::uint8_t>(1, 3);
  h.rack = in.ConsumeIntegralInRange<std::uint8_t>(0, h.job_fan_in - 1);
  h.workers_bitmap = in.ConsumeIntegral<std::uint32_t>() & proto::low_bits(h.rack_fan_in);
  h.racks_bitmap = in.ConsumeIntegral<std::uint32_t>() & proto::low_bits(h.job_fan_in);
  h.value_count = in.ConsumeIntegralInRange<std::uint16_t>(0, r.max_values);
  h.remap_index = in.ConsumeIntegralInRange<std::uint32_t>(0, r.aggregators);
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {  // a reduce-scatter shard's owner, or garbled
    h.remap_index = proto::encode_result_owner(
        {in.ConsumeIntegralInRange<std::uint8_t>(0, 3), in.ConsumeIntegralInRange<std::uint8_t>(0, 4)});
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) h.remap_index ^= 1u << 20;
  }
  // Mostly the job's own token; sometimes another's, as a forger would send.
  const bool forged = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  h.token = forged || h.job == 0 || h.job > tokens.size() ? in.ConsumeIntegral<std::uint32_t>()
                                                          : tokens[h.job - 1];
  // Now and then the run handshake (a join or its answer) or a result query: for one worker,
  // without values.
  if (const int kind = in.ConsumeIntegralInRange<int>(0, 9); kind >= 7) {
    h.kind = kind == 7 ? proto::Kind::join : kind == 8 ? proto::Kind::joined : proto::Kind::query;
    h.flags = 0;
    h.value_count = 0;
    h.racks_bitmap = 0;
    h.workers_bitmap = 1u << (h.workers_bitmap % h.rack_fan_in);
  }
  std::vector<std::uint8_t> p(h.packet_bytes());
  proto::encode(h, p);
  for (std::size_t i = 0; i < h.value_count; ++i) {
    // Values near the int32 limits, so sums wrap and overflow paths run.
    const std::int32_t v = in.ConsumeBool() ? in.ConsumeIntegral<std::int32_t>()
                                            : in.ConsumeIntegralInRange<std::int32_t>(-4, 4);
    proto::store_be_i32(p.data() + proto::kHeaderBytes + 4 * i, v);
  }
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0 && !p.empty())  // one corrupted byte
    p[in.ConsumeIntegralInRange<std::size_t>(0, p.size() - 1)] ^= in.ConsumeIntegral<std::uint8_t>();
  return p;
}

}  // namespace atp::fuzzing
