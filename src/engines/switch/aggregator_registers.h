#pragma once
// The switch's aggregator pool as a Tofino holds it: one register array per field, all indexed
// by aggregator. Each array has the actions below and nothing else; a packet pass applies at
// most one of them per array, and each returns one value to the packet's metadata (a
// RegisterAction in TNA). Fixed size, allocated once; nothing grows per packet.
#include <cstdint>
#include <span>
#include <vector>

namespace atp::engines {

// The owner tag: 64 bits, one register pair a stateful ALU compares and claims in one action.
//   hi = valid (bit 31) | job (15 bits) << 16 | run (16 bits)     lo = seq
struct OwnerTag {
  std::uint32_t hi = 0;
  std::uint32_t lo = 0;
  bool operator==(const OwnerTag&) const = default;

  static OwnerTag of(std::uint32_t job, std::uint16_t run, std::uint32_t seq) {
    return {kValid | (job & 0x7FFFu) << 16 | run, seq};
  }
  bool valid() const { return (hi & kValid) != 0; }
  std::uint32_t job() const { return (hi >> 16) & 0x7FFFu; }
  std::uint16_t run() const { return static_cast<std::uint16_t>(hi); }
  static constexpr std::uint32_t kValid = 0x8000'0000u;
};

// What the owner stage found.
enum class OwnerOutcome : std::uint8_t {
  claimed,    // the aggregator was free: the packet's tag is written
  reclaimed,  // held by an older seq or another run of the same job: overwritten
  same,       // held by this fragment's tag
  other,      // held by someone else: untouched
};

// How a stage treats its register: start it from the packet (a claim), add the packet into
// it (a join), or only read it.
enum class Update : std::uint8_t { start, add, read };

// One aggregator's fields, read out for tests, fuzzers and statistics (not a data-plane path).
struct AggregatorView {
  OwnerTag owner;
  std::uint32_t claimed_at = 0;
  std::uint16_t value_count = 0;
  std::uint32_t bitmap = 0;
  std::uint8_t count = 0;
  bool ecn = false;
  bool wrapped = false;
  std::vector<std::int32_t> values;
  bool valid() const { return owner.valid(); }
  bool operator==(const AggregatorView&) const = default;
};

class AggregatorRegisters {
 public:
  AggregatorRegisters(std::uint32_t size, std::uint16_t values_per_pass, std::uint8_t passes);

  std::uint32_t size() const { return static_cast<std::uint32_t>(owner_.size()); }
  std::uint16_t values_per_pass() const { return values_per_pass_; }
  std::uint8_t passes() const { return passes_; }

  // owner[i]: claim when free, reclaim from an older seq (a window back) or another run of the
  // same job, report `same` for the packet's own tag, else leave it.
  OwnerOutcome owner_claim_or_match(std::uint32_t i, OwnerTag tag, std::uint32_t window);
  // owner[i]: free it if it holds `tag`; returns whether it did.
  bool owner_match_and_free(std::uint32_t i, OwnerTag tag);
  // claimed_at[i] (a 32-bit clock in 65.536 us units): written on a claim; on a join, an
  // entry older than `stale_units` is expired, restamped, and reported so the join restarts it.
  bool claimed_at_expired(std::uint32_t i, bool claiming, std::uint32_t now_units,
                          std::uint32_t stale_units);
  // value_count[i]: written on a claim; otherwise compared with the packet's.
  bool value_count_matches(std::uint32_t i, bool claiming, std::uint16_t value_count);
  // bitmap[i]: returns the bitmap before this packet (start: 0).
  std::uint32_t bitmap_before(std::uint32_t i, Update u, std::uint32_t bit);
  // count[i]: returns the count after this packet.
  std::uint8_t count_after(std::uint32_t i, Update u);
  // ecn[i] and wrapped[i]: sticky bits; return the bit after this packet.
  bool ecn_after(std::uint32_t i, Update u, bool packet_ecn);
  bool wrapped_after(std::uint32_t i, Update u, bool packet_wrapped);
  // values[pass][i][lane] for the lanes of `pass` the packet carries. Each lane returns its value
  // after the update into the packet (big-endian): start keeps the packet's, add writes the sum
  // into both, read copies the register; add_into_packet (a flush) sums into the packet only.
  // Returns true if an int32 addition overflowed.
  bool values_pass(std::uint32_t pass, std::uint32_t i, Update u, std::span<std::uint8_t> lanes);
  bool values_pass_into_packet(std::uint32_t pass, std::uint32_t i, std::span<std::uint8_t> lanes);

  // Control plane and inspection, not per packet.
  void free_job(std::uint32_t job);
  std::uint32_t in_use() const;
  AggregatorView view(std::uint32_t i) const;

 private:
  std::int32_t* lanes_of(std::uint32_t pass, std::uint32_t i) {
    return values_[pass].data() + std::size_t{i} * values_per_pass_;
  }

  std::vector<OwnerTag> owner_;
  std::vector<std::uint32_t> claimed_at_;
  std::vector<std::uint16_t> value_count_;
  std::vector<std::uint32_t> bitmap_;
  std::vector<std::uint8_t> count_;
  std::vector<std::uint8_t> ecn_;
  std::vector<std::uint8_t> wrapped_;
  std::vector<std::vector<std::int32_t>> values_;  // per pass: size x values_per_pass
  std::uint16_t values_per_pass_;
  std::uint8_t passes_;
};

}  // namespace atp::engines
