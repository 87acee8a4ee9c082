#include <gtest/gtest.h>

#include <vector>

#include "proto/aggregator_index.h"
#include "proto/byte_order.h"
#include "proto/crc32.h"
#include "proto/header.h"

namespace atp::proto {
namespace {

Header sample_fragment() {
  Header h;
  h.flags = flag::kResend | flag::kEcn;
  h.next_level = Level::rack;
  h.ps_index = 3;
  h.job = 0xA1B2C3D4;
  h.tensor = 77;
  h.seq = 0xFFFFFFFE;
  h.aggregator = 12345;
  h.workers_bitmap = 1u << 5;
  h.racks_bitmap = 0;
  h.rack_fan_in = 8;
  h.job_fan_in = 4;
  h.rack = 2;
  h.value_count = 64;
  return h;
}

std::vector<std::uint8_t> encode_packet(const Header& h) {
  std::vector<std::uint8_t> p(h.packet_bytes());
  encode(h, p);
  return p;
}

TEST(Header, RoundTripsEveryField) {
  const Header h = sample_fragment();
  const auto packet = encode_packet(h);
  ASSERT_EQ(packet.size(), kHeaderBytes + 64 * 4);
  Header d;
  ASSERT_EQ(decode(packet, d), DecodeError::ok);
  EXPECT_EQ(d.flags, h.flags);
  EXPECT_EQ(d.next_level, h.next_level);
  EXPECT_EQ(d.ps_index, h.ps_index);
  EXPECT_EQ(d.job, h.job);
  EXPECT_EQ(d.tensor, h.tensor);
  EXPECT_EQ(d.seq, h.seq);
  EXPECT_EQ(d.aggregator, h.aggregator);
  EXPECT_EQ(d.workers_bitmap, h.workers_bitmap);
  EXPECT_EQ(d.racks_bitmap, h.racks_bitmap);
  EXPECT_EQ(d.rack_fan_in, h.rack_fan_in);
  EXPECT_EQ(d.job_fan_in, h.job_fan_in);
  EXPECT_EQ(d.rack, h.rack);
  EXPECT_EQ(d.value_count, h.value_count);
}

TEST(Header, FieldsSitAtDocumentedOffsetsInNetworkOrder) {
  const auto p = encode_packet(sample_fragment());
  EXPECT_EQ(p[0], kVersion);
  EXPECT_EQ(p[1], flag::kResend | flag::kEcn);
  EXPECT_EQ(p[2], 1);  // next level: rack
  EXPECT_EQ(p[3], 3);
  EXPECT_EQ(p[4], 0xA1);
  EXPECT_EQ(p[7], 0xD4);
  EXPECT_EQ(load_be32(&p[12]), 0xFFFFFFFEu);
  EXPECT_EQ(load_be32(&p[20]), 1u << 5);
  EXPECT_EQ(p[28], 8);
  EXPECT_EQ(p[29], 4);
  EXPECT_EQ(p[30], 2);
  EXPECT_EQ(load_be16(&p[32]), 64);
}

TEST(Header, MarkEcnSetsOnlyTheEcnFlagOfFragmentKindPackets) {
  Header h = sample_fragment();
  h.flags = flag::kResult;
  auto p = encode_packet(h);
  ASSERT_TRUE(mark_ecn(p));
  Header back;
  ASSERT_EQ(decode(p, back), DecodeError::ok);
  EXPECT_EQ(back.flags, flag::kResult | flag::kEcn);
  EXPECT_EQ(back.seq, h.seq);

  Header join;  // the run handshake carries no flags: left alone
  join.kind = Kind::join;
  join.job = 9;
  join.workers_bitmap = 1;
  auto j = encode_packet(join);
  const auto before = j;
  EXPECT_FALSE(mark_ecn(j));
  EXPECT_EQ(j, before);

  std::vector<std::uint8_t> runt(10, 0xFF);  // malformed: untouched
  EXPECT_FALSE(mark_ecn(runt));
  EXPECT_EQ(runt, std::vector<std::uint8_t>(10, 0xFF));
}

TEST(Header, SupportsTofinoAndSoftwareK) {
  for (std::uint16_t k : {1, 64, 256, 1024}) {
    Header h = sample_fragment();
    h.value_count = k;
    Header d;
    EXPECT_EQ(decode(encode_packet(h), d), DecodeError::ok) << k;
  }
}

struct BadCase {
  const char* name;
  DecodeError expected;
  void (*corrupt)(std::vector<std::uint8_t>&);
};

class HeaderRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(HeaderRejects, WithASpecificError) {
  auto p = encode_packet(sample_fragment());
  GetParam().corrupt(p);
  Header d;
  EXPECT_EQ(decode(p, d), GetParam().expected) << to_string(decode(p, d));
}

INSTANTIATE_TEST_SUITE_P(
    Decode, HeaderRejects,
    ::testing::Values(
        BadCase{"empty", DecodeError::too_short, [](auto& p) { p.clear(); }},
        BadCase{"short", DecodeError::too_short, [](auto& p) { p.resize(kHeaderBytes - 1); }},
        BadCase{"version", DecodeError::bad_version, [](auto& p) { p[0] = 2; }},
        BadCase{"truncated_values", DecodeError::bad_length, [](auto& p) { p.pop_back(); }},
        BadCase{"extra_bytes", DecodeError::bad_length, [](auto& p) { p.push_back(0); }},
        BadCase{"too_many_values", DecodeError::too_many_values,
                [](auto& p) { store_be16(&p[32], kMaxValues + 1); }},
        BadCase{"level", DecodeError::bad_level, [](auto& p) { p[2] = 3; }},
        BadCase{"zero_rack_fan_in", DecodeError::bad_fan_in, [](auto& p) { p[28] = 0; }},
        BadCase{"huge_job_fan_in", DecodeError::bad_fan_in, [](auto& p) { p[29] = 33; }},
        BadCase{"rack_beyond_fan_in", DecodeError::bad_rack, [](auto& p) { p[30] = 4; }},
        BadCase{"worker_bit_beyond_fan_in", DecodeError::bad_bitmap,
                [](auto& p) { store_be32(&p[20], 1u << 8); }},
        BadCase{"rack_bit_beyond_fan_in", DecodeError::bad_bitmap,
                [](auto& p) { store_be32(&p[24], 1u << 4); }},
        BadCase{"no_contributor", DecodeError::bad_bitmap, [](auto& p) { store_be32(&p[20], 0); }},
        BadCase{"rack_whole_and_partial", DecodeError::bad_bitmap,
                [](auto& p) { store_be32(&p[24], 1u << 2); }},
        BadCase{"result_and_resend", DecodeError::bad_flags,
                [](auto& p) { p[1] = flag::kResult | flag::kResend; }},
        BadCase{"result_and_float_request", DecodeError::bad_flags,
                [](auto& p) { p[1] = flag::kResult | flag::kFloatRequest; }},
        BadCase{"float_request_and_collision", DecodeError::bad_flags,
                [](auto& p) { p[1] = flag::kFloatRequest | flag::kCollision; }},
        BadCase{"wrapped_floats", DecodeError::bad_flags,
                [](auto& p) { p[1] = flag::kWrapped | flag::kFloatPayload; }},
        BadCase{"remap_without_result", DecodeError::bad_flags,
                [](auto& p) { p[1] = flag::kRemap; }},
        BadCase{"kind", DecodeError::bad_kind, [](auto& p) { p[31] = 4; }},
        BadCase{"join_with_values", DecodeError::bad_length, [](auto& p) { p[31] = 1; p[1] = 0; }},
        BadCase{"join_with_flags", DecodeError::bad_flags, [](auto& p) { p[31] = 1; p[1] = flag::kResend; }},
        BadCase{"results_behind_on_a_fragment", DecodeError::results_behind_off_result,
                [](auto& p) { p[35] = 1; }},
        BadCase{"results_behind_on_a_float_request", DecodeError::results_behind_off_result,
                [](auto& p) { p[1] = flag::kFloatRequest; p[34] = 0x80; }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Header, OnlyAResultCarriesResultsBehind) {
  Header result = sample_fragment();
  result.flags = flag::kResult;
  result.results_behind = 0x8001;
  Header d;
  ASSERT_EQ(decode(encode_packet(result), d), DecodeError::ok);
  EXPECT_EQ(d.results_behind, 0x8001);
  Header query = result;
  query.kind = Kind::query;
  query.flags = 0;
  query.value_count = 0;
  query.workers_bitmap = 1;
  EXPECT_EQ(decode(encode_packet(query), d), DecodeError::results_behind_off_result);
  query.results_behind = 0;
  EXPECT_EQ(decode(encode_packet(query), d), DecodeError::ok);
  EXPECT_EQ(d.results_behind, 0);
}

TEST(Header, FragmentWithoutValuesIsRejectedButFloatRequestIsNot) {
  Header h = sample_fragment();
  h.value_count = 0;
  Header d;
  EXPECT_EQ(decode(encode_packet(h), d), DecodeError::bad_length);
  h.flags = flag::kFloatRequest;
  EXPECT_EQ(decode(encode_packet(h), d), DecodeError::ok);
}

TEST(Header, HandshakePacketsNameOneWorkerAndCarryNothingElse) {
  Header join;
  join.kind = Kind::join;
  join.job = 7;
  join.seq = 0xDEADBEEF;  // the worker's nonce
  join.rack_fan_in = 4;
  join.job_fan_in = 2;
  join.rack = 1;
  join.workers_bitmap = 1u << 3;
  join.token = 99;
  Header d;
  ASSERT_EQ(decode(encode_packet(join), d), DecodeError::ok);
  EXPECT_EQ(d.kind, Kind::join);
  EXPECT_EQ(d.seq, 0xDEADBEEFu);
  EXPECT_FALSE(d.is_downward());

  Header joined = join;
  joined.kind = Kind::joined;
  joined.tensor = wire_tensor(0x4242, 0);
  ASSERT_EQ(decode(encode_packet(joined), d), DecodeError::ok);
  EXPECT_TRUE(d.is_downward());
  EXPECT_EQ(run_of(d.tensor), 0x4242);

  Header two_workers = join;
  two_workers.workers_bitmap = 0b11;
  EXPECT_EQ(decode(encode_packet(two_workers), d), DecodeError::bad_bitmap);
  Header whole_rack = join;
  whole_rack.racks_bitmap = 1;
  EXPECT_EQ(decode(encode_packet(whole_rack), d), DecodeError::bad_bitmap);
  Header flagged = joined;
  flagged.flags = flag::kResult;
  EXPECT_EQ(decode(encode_packet(flagged), d), DecodeError::bad_flags);
}

// A result names every worker (no bit) or one (a late copy for its asker); a resend request
// may name several.
TEST(Header, AResultNamesNoWorkerOrOne) {
  Header r = sample_fragment();
  r.flags = flag::kResult;
  r.racks_bitmap = 0;
  r.workers_bitmap = 0;
  r.rack_fan_in = 4;
  Header d;
  ASSERT_EQ(decode(encode_packet(r), d), DecodeError::ok);
  EXPECT_FALSE(d.is_addressed_result());
  r.workers_bitmap = 1u << 3;
  ASSERT_EQ(decode(encode_packet(r), d), DecodeError::ok);
  EXPECT_TRUE(d.is_addressed_result());
  r.workers_bitmap = 0b101;
  EXPECT_EQ(decode(encode_packet(r), d), DecodeError::bad_bitmap);
  r.flags = flag::kFloatRequest;
  r.value_count = 0;
  ASSERT_EQ(decode(encode_packet(r), d), DecodeError::ok);
  EXPECT_TRUE(d.is_resend_request());
  EXPECT_FALSE(d.is_addressed_result());
}

// A worker's result query: upward, for one worker, no flags and no values, like a join.
TEST(Header, AResultQueryNamesOneWorkerAndCarriesNothingElse) {
  Header q = sample_fragment();
  q.kind = Kind::query;
  q.next_level = Level::parameter_server;
  q.flags = 0;
  q.value_count = 0;
  q.racks_bitmap = 0;
  q.workers_bitmap = 1u << 2;
  q.rack_fan_in = 4;
  Header d;
  ASSERT_EQ(decode(encode_packet(q), d), DecodeError::ok);
  EXPECT_EQ(d.kind, Kind::query);
  EXPECT_FALSE(d.is_downward());
  EXPECT_EQ(d.seq, q.seq);
  EXPECT_EQ(d.tensor, q.tensor);

  Header with_values = q;
  with_values.value_count = 4;
  EXPECT_EQ(decode(encode_packet(with_values), d), DecodeError::bad_length);
  Header resend = q;
  resend.flags = flag::kResend;
  EXPECT_EQ(decode(encode_packet(resend), d), DecodeError::bad_flags);
  Header two_workers = q;
  two_workers.workers_bitmap = 0b11;
  EXPECT_EQ(decode(encode_packet(two_workers), d), DecodeError::bad_bitmap);
  auto marked = encode_packet(q);
  EXPECT_FALSE(mark_ecn(marked));  // no flags on a query, ECN's included
}

TEST(Header, DecodingRandomBytesNeverCrashes) {
  std::uint64_t x = 42;
  std::vector<std::uint8_t> p;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    p.resize((x >> 33) % 300);
    for (auto& b : p) {
      x = x * 6364136223846793005ull + 1;
      b = static_cast<std::uint8_t>(x >> 56);
    }
    if (p.size() > 0) p[0] = kVersion;
    Header d;
    (void)decode(p, d);
  }
  SUCCEED();
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  const char* check = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const std::uint8_t*>(check), 9), 0xCBF43926u);
}

TEST(AggregatorHash, IsCrcOfBigEndianJobAndSlot) {
  const std::uint8_t key[8] = {0, 0, 0, 7, 0, 0, 0, 3};
  EXPECT_EQ(aggregator_hash(7, 3), crc32(key, 8));
  EXPECT_NE(aggregator_hash(7, 3), aggregator_hash(7, 4));
  EXPECT_NE(aggregator_hash(7, 3), aggregator_hash(8, 3));
}

}  // namespace
}  // namespace atp::proto
