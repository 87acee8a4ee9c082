#include "engines/switch/aggregator_registers.h"

#include "engines/common.h"
#include "engines/vector_clones.h"
#include "proto/byte_order.h"
#include "quant/quantizer.h"

namespace atp::engines {

AggregatorRegisters::AggregatorRegisters(std::uint32_t size, std::uint16_t values_per_pass,
                                         std::uint8_t passes)
    : owner_(size), claim_epoch_(size), value_count_(size), bitmap_(size), count_(size),
      ecn_(size), wrapped_(size),
      values_per_pass_(values_per_pass), passes_(passes) {
  // One array per pass built in place: filling from a prototype would hold two at once.
  values_.reserve(passes);
  for (std::uint8_t p = 0; p < passes; ++p) values_.emplace_back(std::size_t{size} * values_per_pass);
}

// Two conditions, as a Tofino 1 stateful ALU has: claimable (hi <= expired_at_or_before, which
// holds for free ones: epochs start at 2) and lo == keyed seq.
SeqOutcome AggregatorRegisters::owner_seq_claim_or_match(std::uint32_t i, std::uint32_t keyed_seq,
                                                         ClaimClock clock) {
  std::uint32_t& epoch = claim_epoch_[i];
  if (epoch <= clock.expired_at_or_before()) {
    const bool was_free = epoch == 0;
    epoch = clock.epoch;
    owner_[i].lo = keyed_seq;
    return was_free ? SeqOutcome::claimed : SeqOutcome::taken_over;
  }
  return owner_[i].lo == keyed_seq ? SeqOutcome::same_seq : SeqOutcome::other;
}

bool AggregatorRegisters::owner_seq_match_and_free(std::uint32_t i, std::uint32_t keyed_seq) {
  if (claim_epoch_[i] == 0 || owner_[i].lo != keyed_seq) return false;
  claim_epoch_[i] = 0;
  return true;
}

void AggregatorRegisters::owner_id_write(std::uint32_t i, std::uint32_t id) { owner_[i].hi = id; }

bool AggregatorRegisters::owner_id_matches(std::uint32_t i, std::uint32_t id) {
  return owner_[i].hi == id;
}

bool AggregatorRegisters::value_count_matches(std::uint32_t i, bool claiming,
                                              std::uint16_t value_count) {
  if (claiming) value_count_[i] = value_count;
  return value_count_[i] == value_count;
}

std::uint32_t AggregatorRegisters::bitmap_before(std::uint32_t i, Update u, std::uint32_t bit) {
  std::uint32_t& reg = bitmap_[i];
  const std::uint32_t before = u == Update::start ? 0 : reg;
  if (u == Update::start) reg = bit;
  if (u == Update::add) reg |= bit;
  return before;
}

std::uint8_t AggregatorRegisters::count_after(std::uint32_t i, Update u) {
  std::uint8_t& reg = count_[i];
  if (u == Update::start) reg = 1;
  if (u == Update::add) ++reg;
  return reg;
}

namespace {
bool sticky_bit(std::uint8_t& reg, Update u, bool packet_bit) {
  if (u == Update::start) reg = packet_bit;
  if (u == Update::add) reg |= packet_bit;
  return reg != 0;
}
}  // namespace

bool AggregatorRegisters::ecn_after(std::uint32_t i, Update u, bool packet_ecn) {
  return sticky_bit(ecn_[i], u, packet_ecn);
}

bool AggregatorRegisters::wrapped_after(std::uint32_t i, Update u, bool packet_wrapped) {
  return sticky_bit(wrapped_[i], u, packet_wrapped);
}

namespace {

// One lane's add, as its stateful ALU does it: wrapping int32, with signed overflow reported.
// In unsigned arithmetic and without branches, so the compiler turns a pass into vector code:
// a sum overflowed iff both addends' signs differ from its own.
inline std::uint32_t add_lane(std::uint32_t reg, std::uint32_t value, std::uint32_t& overflow) {
  const std::uint32_t sum = reg + value;
  overflow |= (reg ^ sum) & (value ^ sum);
  return sum;
}

inline bool sign_bit(std::uint32_t bits) { return (bits >> 31) != 0; }

// regs += wire, and wire = the sums; returns the lanes' overflow bits.
ATP_VECTOR_CLONES
std::uint32_t add_lanes(std::uint32_t* regs, std::uint8_t* wire, std::size_t n) {
  std::uint32_t overflow = 0;
  for (std::size_t lane = 0; lane < n; ++lane) {
    regs[lane] = add_lane(regs[lane], proto::load_be32(wire + 4 * lane), overflow);
    proto::store_be32(wire + 4 * lane, regs[lane]);
  }
  return overflow;
}

// wire = regs + wire, the registers untouched; returns the lanes' overflow bits.
ATP_VECTOR_CLONES
std::uint32_t add_lanes_into(const std::uint32_t* regs, std::uint8_t* wire, std::size_t n) {
  std::uint32_t overflow = 0;
  for (std::size_t lane = 0; lane < n; ++lane)
    proto::store_be32(wire + 4 * lane,
                      add_lane(regs[lane], proto::load_be32(wire + 4 * lane), overflow));
  return overflow;
}

}  // namespace

// The lanes are the stateful ALUs of one pass, side by side; the loops are their width.
bool AggregatorRegisters::values_pass(std::uint32_t pass, std::uint32_t i, Update u,
                                      std::span<std::uint8_t> lanes) {
  auto* regs = reinterpret_cast<std::uint32_t*>(lanes_of(pass, i));
  const std::size_t n = lanes.size() / 4;
  switch (u) {
    case Update::start: quant::swap_words(lanes.data(), n, regs); return false;
    case Update::add: return sign_bit(add_lanes(regs, lanes.data(), n));
    case Update::read: quant::swap_words(regs, n, lanes.data()); return false;
  }
  return false;
}

bool AggregatorRegisters::values_pass_into_packet(std::uint32_t pass, std::uint32_t i,
                                                  std::span<std::uint8_t> lanes) {
  const auto* regs = reinterpret_cast<const std::uint32_t*>(lanes_of(pass, i));
  return sign_bit(add_lanes_into(regs, lanes.data(), lanes.size() / 4));
}

void AggregatorRegisters::free_job(std::uint32_t job) {
  for (std::uint32_t i = 0; i < size(); ++i)
    if (owner_[i].job() == job) claim_epoch_[i] = 0;
}

std::uint32_t AggregatorRegisters::in_use() const {
  std::uint32_t n = 0;
  for (std::uint32_t epoch : claim_epoch_) n += epoch != 0 ? 1 : 0;
  return n;
}

AggregatorView AggregatorRegisters::view(std::uint32_t i) const {
  AggregatorView v{owner_[i], claim_epoch_[i], value_count_[i], bitmap_[i], count_[i],
                   ecn_[i] != 0, wrapped_[i] != 0, {}};
  for (const auto& pass : values_) {
    const auto* first = pass.data() + std::size_t{i} * values_per_pass_;
    v.values.insert(v.values.end(), first, first + values_per_pass_);
  }
  return v;
}

}  // namespace atp::engines
