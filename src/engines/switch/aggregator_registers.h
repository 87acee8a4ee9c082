#pragma once
// The switch's aggregator pool as a Tofino holds it: one register array per field, all indexed
// by aggregator. Each array has the actions below and nothing else; a packet pass applies at
// most one of them per array, and each returns one value to the packet's metadata (a
// RegisterAction in TNA). Fixed size, allocated once; nothing grows per packet.
#include <cstdint>
#include <span>
#include <vector>

namespace atp::engines {

// The owner tag: 64 bits in two registers a Tofino 1 stateful ALU (two conditions each) can
// decide on in consecutive stages:
//   owner_seq = {lo: seq ^ token, hi: the claim epoch, 0 when free}
//   owner_id  = job (15 bits) << 16 | run
// The seq stage comes first: it claims a free or expired aggregator, or says whether it holds the
// packet's keyed seq; the identity stage then confirms the job and run. The seq is keyed by the
// job's secret wire token so that the seq stage, which frees on a match before the identity
// stage can look, never frees another job's aggregator: a packet names a held aggregator's `lo`
// only with that job's token (a tenant naming another job's seq and index on purpose included).
struct OwnerTag {
  std::uint32_t hi = 0;  // owner_id
  std::uint32_t lo = 0;  // seq ^ token
  bool operator==(const OwnerTag&) const = default;

  static OwnerTag of(std::uint32_t job, std::uint16_t run, std::uint32_t seq, std::uint32_t token) {
    return {(job & 0x7FFFu) << 16 | run, seq ^ token};
  }
  std::uint32_t job() const { return (hi >> 16) & 0x7FFFu; }
  std::uint16_t run() const { return static_cast<std::uint16_t>(hi); }
};

// The claim clock: epochs of half of stale_after, counted from 2 so that 0 can mean "free" and
// still compare as expired. On a Tofino the control plane ticks it into a register; the C++
// pipeline derives it from its (never wrapping) 64-bit time.
struct ClaimClock {
  std::uint32_t epoch = 2;
  // A claim stamped at or before this epoch is stale_after old (or the aggregator is free).
  std::uint32_t expired_at_or_before() const { return epoch - 2; }
};

// What the seq stage found.
enum class SeqOutcome : std::uint8_t {
  claimed,     // the aggregator was free: the packet's seq and epoch are written
  taken_over,  // held, but claimed stale_after ago or more: overwritten as a claim
  same_seq,    // held for this seq (by this job if the identity stage agrees)
  other,       // held for another seq: untouched
};

// How a stage treats its register: start it from the packet (a claim), add the packet into
// it (a join), or only read it.
enum class Update : std::uint8_t { start, add, read };

// One aggregator's fields, read out for tests, fuzzers and statistics (not a data-plane path).
struct AggregatorView {
  OwnerTag owner;
  std::uint32_t claim_epoch = 0;  // 0: free
  std::uint16_t value_count = 0;
  std::uint32_t bitmap = 0;
  std::uint8_t count = 0;
  bool ecn = false;
  bool wrapped = false;
  std::vector<std::int32_t> values;
  bool valid() const { return claim_epoch != 0; }
  bool operator==(const AggregatorView&) const = default;
};

class AggregatorRegisters {
 public:
  AggregatorRegisters(std::uint32_t size, std::uint16_t values_per_pass, std::uint8_t passes);

  std::uint32_t size() const { return static_cast<std::uint32_t>(owner_.size()); }
  std::uint16_t values_per_pass() const { return values_per_pass_; }
  std::uint8_t passes() const { return passes_; }

  // owner_seq[i] (lo = keyed seq, hi = claim epoch): claim when free or expired, else compare
  // the keyed seq (OwnerTag::lo).
  SeqOutcome owner_seq_claim_or_match(std::uint32_t i, std::uint32_t keyed_seq, ClaimClock clock);
  // owner_seq[i]: free it if it is held for `keyed_seq`; returns whether it did. The identity
  // stage comes after; the key keeps another job's aggregator out of this free (OwnerTag).
  bool owner_seq_match_and_free(std::uint32_t i, std::uint32_t keyed_seq);
  // owner_id[i]: written on a claim, compared otherwise.
  void owner_id_write(std::uint32_t i, std::uint32_t id);
  bool owner_id_matches(std::uint32_t i, std::uint32_t id);
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

  std::vector<OwnerTag> owner_;  // lo = owner_seq.lo, hi = owner_id
  std::vector<std::uint32_t> claim_epoch_;  // owner_seq.hi
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
