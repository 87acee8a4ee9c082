#pragma once
// The ATP header: a fixed 44-byte block at the start of every UDP payload, followed by
// `value_count` 32-bit values (int32, or float32 when the overflow flag is set), big-endian.
// docs/protocol.md has the byte layout and the meaning of every field.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "proto/byte_order.h"

namespace atp::proto {

inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 44;
inline constexpr std::size_t kValueBytes = 4;
// Software switches take K up to this; the Tofino profile uses K = 64.
inline constexpr std::uint16_t kMaxValues = 1024;
// A result's results_behind names this many of its shard's seqs before it.
inline constexpr unsigned kResultsBehind = 16;
// Bitmaps are 32 bits wide, so at most 32 workers per rack and 32 racks per job.
inline constexpr unsigned kMaxFanIn = 32;
inline constexpr std::uint16_t kDefaultUdpPort = 9999;

namespace flag {
inline constexpr std::uint8_t kResult = 0x01;        // PS -> workers: the finished sum
inline constexpr std::uint8_t kResend = 0x02;        // worker retransmission: flushes switch state
inline constexpr std::uint8_t kCollision = 0x04;     // met another fragment's aggregator
inline constexpr std::uint8_t kEcn = 0x08;           // congestion experienced on the way
inline constexpr std::uint8_t kFloatPayload = 0x10;  // payload is float32, not int32
inline constexpr std::uint8_t kWrapped = 0x20;       // an int32 sum overflowed: values invalid
// PS -> workers: send this seq again. Naming no worker: every worker, as floats (a sum left
// int32). Naming workers (`workers_bitmap` of rack `rack`): a resend request, for just those
// workers, whose contributions the PS still lacks after a resend flushed the switches.
inline constexpr std::uint8_t kFloatRequest = 0x40;
inline constexpr std::uint8_t kRemap = 0x80;         // result suggests `remap_index` for the slot
}  // namespace flag

// Which element handles the packet next on its way up.
enum class Level : std::uint8_t { parameter_server = 0, rack = 1, spine = 2 };

// What the packet is. Switches aggregate only fragments; the other kinds pass through switches
// untouched: a job's start-up handshake with its first PS, which hands every worker of a
// launch the same fresh run id (engines.md, "Runs"), and a worker's result query.
enum class Kind : std::uint8_t {
  fragment = 0,  // a gradient fragment going up, or a result / float request coming down
  join = 1,      // worker -> PS 0: "which run am I in?", seq = the worker's nonce
  joined = 2,    // PS 0 -> workers: the run (high half of `tensor`) for the nonce in seq
  // worker -> the seq's PS, next_level 0, no values: "I have no result for (tensor, seq)".
  // The PS sends the result again if it has it, else asks for what it lacks (engines.md §3.6).
  query = 3,
};

// A join's `remap_index` (0 on a join asking for a run): a worker given its run by its launcher
// claims it (kRunClaim | run), and PS 0's answer says kRunRefused when another launch of the
// job used that run on these daemons: a reused run id then fails loudly instead of being
// answered with that launch's kept results (engines/ps/run_registry.h).
inline constexpr std::uint32_t kRunClaim = 1u << 16;
inline constexpr std::uint32_t kRunRefused = 1u << 17;

// An upward fragment's `remap_index` (0 on an allreduce's): a reduce-scatter shard's fragment
// names the one worker that keeps the seq's values, kResultOwner | rack << 8 | rank in the
// rack. Its PS sends the result to that worker alone and a header-only result (value_count
// 0, a "done copy") to the job's members, whose windows and recovery still need to know the seq
// is summed (docs/protocol.md §8.1). Switches carry the field up untouched.
inline constexpr std::uint32_t kResultOwner = 1u << 31;
struct ResultOwner {
  std::uint8_t rack = 0;
  std::uint8_t rank_in_rack = 0;
  bool operator==(const ResultOwner&) const = default;
};
inline std::uint32_t encode_result_owner(ResultOwner o) {
  return kResultOwner | std::uint32_t{o.rack} << 8 | o.rank_in_rack;
}
// The owner a fragment names; nullopt for an allreduce's fragment (or a field not of this form).
inline std::optional<ResultOwner> decode_result_owner(std::uint32_t remap_index) {
  if ((remap_index & ~0xFFFFu) != kResultOwner) return std::nullopt;
  return ResultOwner{static_cast<std::uint8_t>(remap_index >> 8),
                     static_cast<std::uint8_t>(remap_index)};
}

// Where each field sits (docs/protocol.md has the layout).
namespace offset {
constexpr std::size_t version = 0;
constexpr std::size_t flags = 1;
constexpr std::size_t next_level = 2;
constexpr std::size_t ps_index = 3;
constexpr std::size_t job = 4;
constexpr std::size_t tensor = 8;
constexpr std::size_t seq = 12;
constexpr std::size_t aggregator = 16;
constexpr std::size_t workers_bitmap = 20;
constexpr std::size_t racks_bitmap = 24;
constexpr std::size_t rack_fan_in = 28;
constexpr std::size_t job_fan_in = 29;
constexpr std::size_t rack = 30;
constexpr std::size_t kind = 31;
constexpr std::size_t value_count = 32;
constexpr std::size_t results_behind = 34;
constexpr std::size_t remap_index = 36;
constexpr std::size_t token = 40;
}  // namespace offset
static_assert(offset::token + 4 == kHeaderBytes);

struct Header {
  Kind kind = Kind::fragment;
  std::uint8_t flags = 0;
  Level next_level = Level::rack;
  std::uint8_t ps_index = 0;
  std::uint32_t job = 0;
  // The job's run (high 16 bits) and the allreduce call this fragment belongs to (low 16 bits,
  // counting up). Neither this nor `seq` is unique for ever: protocol.md §7 says what names a
  // fragment at the switch (job, run, seq, plus a claim clock) and at the PS.
  std::uint32_t tensor = 0;
  // Job-wide fragment sequence number; slot = seq mod window.
  std::uint32_t seq = 0;
  // Aggregator index chosen by the worker; each switch reduces it modulo its pool size.
  std::uint32_t aggregator = 0;
  // Contributors: every worker of each rack in `racks_bitmap`, plus the workers in
  // `workers_bitmap` of rack `rack`. A worker's own fragment has racks_bitmap = 0.
  std::uint32_t workers_bitmap = 0;  // level 1 bitmap
  std::uint32_t racks_bitmap = 0;    // level 2 bitmap
  std::uint8_t rack_fan_in = 1;      // workers in rack `rack` (level 1 fan-in)
  std::uint8_t job_fan_in = 1;       // racks of the job (level 2 fan-in)
  std::uint8_t rack = 0;
  std::uint16_t value_count = 0;
  // Results only (0 on every other packet): bit i is set when the PS had already sent the
  // result of its shard's (i + 1)-th seq before this one, seq - (i + 1) * parameter servers.
  // A worker missing that seq's result then knows it was lost on the way down: it asks for the
  // result instead of resending its values (engines.md §3.6).
  std::uint16_t results_behind = 0;
  std::uint32_t remap_index = 0;
  // The job's secret: switches, PSs and workers drop packets of the job that carry another.
  std::uint32_t token = 0;

  bool has(std::uint8_t f) const { return (flags & f) != 0; }
  void set(std::uint8_t f, bool on = true) { flags = on ? (flags | f) : (flags & ~f); }
  bool is_downward() const {
    return has(flag::kResult) || has(flag::kFloatRequest) || kind == Kind::joined;
  }
  std::size_t packet_bytes() const { return kHeaderBytes + std::size_t{value_count} * kValueBytes; }
  // A float request that names workers asks only them to resend, as they sent (flag::kFloatRequest).
  bool is_resend_request() const { return has(flag::kFloatRequest) && workers_bitmap != 0; }
  // A result that names a worker (`workers_bitmap`, one bit, of rack `rack`) is a kept result
  // sent again for that worker alone: the switches send it down toward that worker only,
  // where a result naming no one goes to every worker of the job (protocol.md §4, "late copies").
  bool is_addressed_result() const { return has(flag::kResult) && workers_bitmap != 0; }
};

enum class DecodeError : std::uint8_t {
  ok,
  too_short,
  bad_version,
  bad_length,
  too_many_values,
  bad_level,
  bad_fan_in,
  bad_rack,
  bad_bitmap,
  bad_flags,
  bad_kind,
  results_behind_off_result,
};

std::string_view to_string(DecodeError e);

// Parses and validates the header of `packet` (the whole UDP payload, values included).
// Defined in proto/header_decode.h.
inline DecodeError decode(std::span<const std::uint8_t> packet, Header& out);

// Writes the 44 header bytes; the caller owns the values that follow.
void encode(const Header& h, std::span<std::uint8_t> out);

// A worker's fragments differ from each other in a few fields only: the rest is encoded once
// and copied, and write() stores the ones that change.
class FragmentTemplate {
 public:
  explicit FragmentTemplate(const Header& fixed);
  void write(std::uint8_t flags, std::uint8_t ps_index, std::uint32_t tensor, std::uint32_t seq,
             std::uint32_t aggregator, std::uint16_t value_count, std::uint8_t* out) const {
    std::memcpy(out, bytes_, kHeaderBytes);
    out[offset::flags] = flags;
    out[offset::ps_index] = ps_index;
    store_be32(out + offset::tensor, tensor);
    store_be32(out + offset::seq, seq);
    store_be32(out + offset::aggregator, aggregator);
    store_be16(out + offset::value_count, value_count);
  }

 private:
  std::uint8_t bytes_[kHeaderBytes] = {};
};

// Rewrites only the mutable fields a switch touches (flags, level, bitmaps), in place.
void encode_flags_and_bitmaps(const Header& h, std::span<std::uint8_t> packet);

// Sets the `ecn` flag of a valid fragment-kind packet (a fragment, sum, result or float
// request) in place: congestion on the way, from a switch's queue or an IP CE mark. The
// handshake's packets carry no flags and are left alone, as is anything malformed. Returns
// whether the packet now carries the flag.
bool mark_ecn(std::span<std::uint8_t> packet);

inline std::span<std::uint8_t> payload(std::span<std::uint8_t> packet) {
  return packet.subspan(kHeaderBytes);
}
inline std::span<const std::uint8_t> payload(std::span<const std::uint8_t> packet) {
  return packet.subspan(kHeaderBytes);
}

// The `tensor` field: the job's run in the high 16 bits, the run's tensor counter in the low 16.
// A new run of a job (restarted workers, same daemons) thus never meets the state an earlier
// run left in a switch or PS: its fragments name other tensors, and state of another run gives
// way to the packet at hand. Runs are not ordered (a clock-derived id wraps): a delayed packet
// of a dead run may displace a live run's partial state, which the live run's resends rebuild.
inline std::uint32_t wire_tensor(std::uint16_t run, std::uint32_t counter) {
  return (std::uint32_t{run} << 16) | (counter & 0xFFFFu);
}
inline std::uint16_t run_of(std::uint32_t tensor) { return static_cast<std::uint16_t>(tensor >> 16); }

inline std::uint32_t low_bits(unsigned n) { return n >= 32 ? ~0u : ((1u << n) - 1u); }

}  // namespace atp::proto

#include "proto/header_decode.h"  // decode()'s inline definition
