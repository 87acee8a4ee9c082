#include "sim/collective.h"

namespace atp::sim {

// Shard r of `size` values: ceil(size / ranks) each, the last ones shorter (or empty).
Collective::Range AtpCollective::shard(std::size_t size, std::size_t rank) const {
  const std::size_t each = (size + ranks_.size() - 1) / ranks_.size();
  const std::size_t offset = std::min(size, rank * each);
  return {offset, std::min(each, size - offset)};
}

Collective::Range AtpCollective::kept(std::size_t size) const {
  return ranks_.empty() ? Range{0, size} : shard(size, self_);
}

std::uint32_t AtpCollective::submit(Time now, std::span<const float> input,
                                    std::span<float> output, Outbox& out) {
  if (ranks_.empty()) return worker_.submit(now, input, output, out);
  std::uint32_t first = 0;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    const Range r = shard(input.size(), rank);
    const std::uint32_t id =
        worker_.submit(now, quant::Precision::float32, input.data() + r.offset,
                       rank == self_ ? output.data() + r.offset : nullptr, r.count, out,
                       ranks_[rank]);
    if (rank == 0) first = id;
  }
  return first / static_cast<std::uint32_t>(ranks_.size());
}

std::vector<std::uint32_t> AtpCollective::take_completed() {
  std::vector<std::uint32_t> tensors = worker_.take_completed();
  if (ranks_.empty()) return tensors;
  std::vector<std::uint32_t> calls;
  for (std::uint32_t id : tensors) {
    const std::uint32_t call = id / static_cast<std::uint32_t>(ranks_.size());
    if (++shards_done_[call] < ranks_.size()) continue;
    shards_done_.erase(call);
    calls.push_back(call);
  }
  return calls;
}

}  // namespace atp::sim
