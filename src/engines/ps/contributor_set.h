#pragma once
// Which workers a sum contains: one worker bitmap per rack. The PS's dedup rests on this: a
// contribution is taken whole only if it shares no worker with what is already held, so no
// worker is ever counted twice, whatever mix of rack sums, flushes and single fragments arrives.
#include <array>
#include <bit>
#include <cstdint>
#include <span>

#include "proto/header.h"

namespace atp::engines {

class ContributorSet {
 public:
  // The workers a packet speaks for: every worker of each rack in racks_bitmap (full_masks
  // gives each rack's workers), plus workers_bitmap of rack `rack`.
  static ContributorSet of(const proto::Header& h, std::span<const std::uint32_t> full_masks) {
    ContributorSet s;
    for (std::uint32_t racks = h.racks_bitmap; racks != 0; racks &= racks - 1) {
      const int r = std::countr_zero(racks);
      s.racks_[r] = full_masks[r];
    }
    s.racks_[h.rack] |= h.workers_bitmap;
    return s;
  }

  bool disjoint(const ContributorSet& other) const {
    for (std::size_t r = 0; r < racks_.size(); ++r)
      if ((racks_[r] & other.racks_[r]) != 0) return false;
    return true;
  }
  // True if every worker of `other` is in this set too.
  bool includes(const ContributorSet& other) const {
    for (std::size_t r = 0; r < racks_.size(); ++r)
      if ((other.racks_[r] & ~racks_[r]) != 0) return false;
    return true;
  }
  void add(unsigned rack, std::uint32_t workers) { racks_[rack] |= workers; }
  void add(const ContributorSet& other) {
    for (std::size_t r = 0; r < racks_.size(); ++r) racks_[r] |= other.racks_[r];
  }
  bool covers(std::span<const std::uint32_t> full_masks) const {
    for (std::size_t r = 0; r < full_masks.size(); ++r)
      if ((racks_[r] & full_masks[r]) != full_masks[r]) return false;
    return true;
  }
  bool contains(unsigned rack, unsigned worker) const {
    return (racks_[rack] >> worker) & 1u;
  }
  std::uint32_t workers_of(unsigned rack) const { return racks_[rack]; }
  // Whether the set holds exactly one worker, and which (its rack and bit).
  bool single(unsigned& rack, unsigned& worker) const {
    int found = 0;
    for (std::size_t r = 0; r < racks_.size(); ++r) {
      found += std::popcount(racks_[r]);
      if (racks_[r] != 0) {
        rack = static_cast<unsigned>(r);
        worker = static_cast<unsigned>(std::countr_zero(racks_[r]));
      }
    }
    return found == 1;
  }
  bool empty() const {
    for (std::uint32_t r : racks_)
      if (r != 0) return false;
    return true;
  }
  void clear() { racks_.fill(0); }

 private:
  std::array<std::uint32_t, proto::kMaxFanIn> racks_{};
};

}  // namespace atp::engines
