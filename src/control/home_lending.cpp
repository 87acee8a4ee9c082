#include "control/home_lending.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace atp::control {

namespace {
std::uint64_t end_of(const Slice& s) { return std::uint64_t{s.first} + s.count; }
bool overlap(const Slice& a, const Slice& b) {
  return a.first < end_of(b) && b.first < end_of(a);
}
}  // namespace

std::vector<Slice> lend_idle_homes(std::span<const Slice> homes, const std::vector<bool>& present,
                                   std::span<const std::uint32_t> wants) {
  if (homes.size() != present.size() || homes.size() != wants.size())
    throw std::invalid_argument("lend_idle_homes: one presence flag and one want per home");
  std::vector<Slice> now(homes.begin(), homes.end());
  std::vector<bool> lent(homes.size(), false);
  // Lendable: absent, not empty, clear of every present job's own home and of what is lent
  // already (two absent jobs may have been given the same slice).
  auto lendable = [&](std::size_t a) {
    if (present[a] || homes[a].count == 0) return false;
    for (std::size_t p = 0; p < homes.size(); ++p)
      if ((present[p] || lent[p]) && overlap(homes[a], homes[p])) return false;
    return true;
  };
  std::vector<std::size_t> order(homes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return homes[a].first < homes[b].first; });
  auto grows = [&](std::size_t p) {
    return present[p] && now[p].count > 0 && now[p].count < wants[p];
  };
  // Upward: each lendable slice joins the present home (as grown so far) ending where it begins.
  for (std::size_t a : order) {
    if (!lendable(a)) continue;
    for (std::size_t p : order)
      if (grows(p) && end_of(now[p]) == homes[a].first) {
        now[p].count += homes[a].count;
        lent[a] = true;
        break;
      }
  }
  // Downward, for slices no home below took: the present home beginning where it ends.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t a = *it;
    if (lent[a] || !lendable(a)) continue;
    for (std::size_t p : order)
      if (grows(p) && now[p].first == end_of(homes[a])) {
        now[p].first = homes[a].first;
        now[p].count += homes[a].count;
        lent[a] = true;
        break;
      }
  }
  return now;
}

std::vector<Slice> lend_idle_pool(std::span<const Slice> homes, std::uint32_t pool,
                                  std::uint32_t block, std::span<const std::uint32_t> wants) {
  if (homes.size() != wants.size())
    throw std::invalid_argument("lend_idle_pool: one want per home");
  if (block == 0) throw std::invalid_argument("lend_idle_pool: blocks of 0 aggregators");
  std::vector<Slice> all(homes.begin(), homes.end());
  std::vector<bool> present(homes.size(), true);
  std::vector<std::uint32_t> all_wants(wants.begin(), wants.end());
  for (std::uint32_t first = 0; first < pool;) {
    // The idle run from `first` up to the next home or block boundary, whichever comes first.
    std::uint64_t end = std::min<std::uint64_t>(pool, (std::uint64_t{first} / block + 1) * block);
    bool held = false;
    for (const Slice& h : homes) {
      if (h.count == 0) continue;
      if (h.first <= first && first < end_of(h)) {
        held = true;
        end = end_of(h);  // skip the home
        break;
      }
      if (h.first > first && h.first < end) end = h.first;
    }
    if (!held) {
      all.push_back({first, static_cast<std::uint32_t>(end - first)});
      present.push_back(false);
      all_wants.push_back(0);
    }
    first = static_cast<std::uint32_t>(std::min<std::uint64_t>(end, pool));
  }
  all = lend_idle_homes(all, present, all_wants);
  all.resize(homes.size());
  return all;
}

}  // namespace atp::control
