#include "engines/switch/aggregator_registers.h"

#include "engines/common.h"
#include "proto/byte_order.h"

namespace atp::engines {

AggregatorRegisters::AggregatorRegisters(std::uint32_t size, std::uint16_t values_per_pass,
                                         std::uint8_t passes)
    : owner_(size), claimed_at_(size), value_count_(size), bitmap_(size), count_(size),
      ecn_(size), wrapped_(size),
      values_(passes, std::vector<std::int32_t>(std::size_t{size} * values_per_pass)),
      values_per_pass_(values_per_pass), passes_(passes) {}

OwnerOutcome AggregatorRegisters::owner_claim_or_match(std::uint32_t i, OwnerTag tag,
                                                       std::uint32_t window) {
  OwnerTag& held = owner_[i];
  if (!held.valid()) {
    held = tag;
    return OwnerOutcome::claimed;
  }
  if (held == tag) return OwnerOutcome::same;
  // The same job: another run gives way, and so does a seq a window back, since the job's
  // sending seq + window proves seq finished at the PS.
  const bool stale = held.hi == tag.hi
                         ? seq_distance(tag.lo, held.lo) >= static_cast<std::int32_t>(window)
                         : held.job() == tag.job();
  if (!stale) return OwnerOutcome::other;
  held = tag;
  return OwnerOutcome::reclaimed;
}

bool AggregatorRegisters::owner_match_and_free(std::uint32_t i, OwnerTag tag) {
  if (owner_[i] != tag) return false;
  owner_[i] = OwnerTag{};
  return true;
}

bool AggregatorRegisters::claimed_at_expired(std::uint32_t i, bool claiming,
                                             std::uint32_t now_units, std::uint32_t stale_units) {
  std::uint32_t& stamp = claimed_at_[i];
  const bool expired = !claiming && now_units - stamp >= stale_units;
  if (claiming || expired) stamp = now_units;
  return expired;
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

// The lanes are the stateful ALUs of one pass, side by side; the loop is their width.
bool AggregatorRegisters::values_pass(std::uint32_t pass, std::uint32_t i, Update u,
                                      std::span<std::uint8_t> lanes) {
  std::int32_t* regs = lanes_of(pass, i);
  bool overflow = false;
  for (std::size_t lane = 0; lane < lanes.size() / 4; ++lane) {
    std::uint8_t* wire = lanes.data() + 4 * lane;
    switch (u) {
      case Update::start: regs[lane] = proto::load_be_i32(wire); break;
      case Update::add: {
        std::int32_t sum;
        overflow |= __builtin_add_overflow(regs[lane], proto::load_be_i32(wire), &sum);
        regs[lane] = sum;
        proto::store_be_i32(wire, sum);
        break;
      }
      case Update::read: proto::store_be_i32(wire, regs[lane]); break;
    }
  }
  return overflow;
}

bool AggregatorRegisters::values_pass_into_packet(std::uint32_t pass, std::uint32_t i,
                                                  std::span<std::uint8_t> lanes) {
  const std::int32_t* regs = lanes_of(pass, i);
  bool overflow = false;
  for (std::size_t lane = 0; lane < lanes.size() / 4; ++lane) {
    std::uint8_t* wire = lanes.data() + 4 * lane;
    std::int32_t sum;
    overflow |= __builtin_add_overflow(regs[lane], proto::load_be_i32(wire), &sum);
    proto::store_be_i32(wire, sum);
  }
  return overflow;
}

void AggregatorRegisters::free_job(std::uint32_t job) {
  for (OwnerTag& tag : owner_)
    if (tag.valid() && tag.job() == job) tag = OwnerTag{};
}

std::uint32_t AggregatorRegisters::in_use() const {
  std::uint32_t n = 0;
  for (const OwnerTag& tag : owner_) n += tag.valid() ? 1 : 0;
  return n;
}

AggregatorView AggregatorRegisters::view(std::uint32_t i) const {
  AggregatorView v{owner_[i], claimed_at_[i], value_count_[i], bitmap_[i], count_[i],
                   ecn_[i] != 0, wrapped_[i] != 0, {}};
  for (const auto& pass : values_) {
    const auto* first = pass.data() + std::size_t{i} * values_per_pass_;
    v.values.insert(v.values.end(), first, first + values_per_pass_);
  }
  return v;
}

}  // namespace atp::engines
