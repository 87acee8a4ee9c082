#include "sim/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "proto/byte_order.h"
#include "quant/quantizer.h"

namespace atp::sim {

namespace {

enum RingField { kMagic = 0, kTo = 4, kFrom = 8, kTensor = 12, kStep = 16, kPacket = 20,
                 kCount = 24, kKind = 28 };
enum RingKind : std::uint32_t { kData = 0, kAck = 1 };

std::uint32_t field(std::span<const std::uint8_t> p, RingField f) {
  return proto::load_be32(p.data() + f);
}

std::span<std::uint8_t> new_packet(Outbox& out, NodeId via, NodeId from, NodeId to,
                                   RingKind kind, std::size_t values) {
  std::span<std::uint8_t> p = out.add(via, kRingHeaderBytes + 4 * values);
  std::memset(p.data(), 0, kRingHeaderBytes);
  proto::store_be32(p.data() + kMagic, kRingMagic);
  proto::store_be32(p.data() + kTo, to);
  proto::store_be32(p.data() + kFrom, from);
  proto::store_be32(p.data() + kKind, kind);
  return p;
}

}  // namespace

std::optional<NodeId> ring_destination(std::span<const std::uint8_t> packet) {
  if (packet.size() < kRingHeaderBytes || field(packet, kMagic) != kRingMagic) return std::nullopt;
  return field(packet, kTo);
}

RingAllreduce::RingAllreduce(RingConfig config)
    : config_(config), steps_(2 * (config.workers - 1)) {
  if (config_.workers == 0 || config_.rank >= config_.workers || config_.values_per_packet == 0 ||
      config_.window == 0 || !(config_.scale > 0))
    throw std::invalid_argument("ring allreduce: bad configuration");
}

// Chunk i of N: values [i * c, min((i + 1) * c, n)) with c = ceil(n / N).
RingAllreduce::Span RingAllreduce::chunk(const Tensor& t, std::uint32_t index) const {
  const std::size_t c = (t.values + config_.workers - 1) / config_.workers;
  const std::size_t first = std::min(t.values, std::size_t{index} * c);
  return {first, std::min(c, t.values - first)};
}

RingAllreduce::Span RingAllreduce::packet_span(const Tensor& t, std::uint32_t chunk_index,
                                               std::uint32_t packet) const {
  const Span c = chunk(t, chunk_index);
  const std::size_t offset = std::size_t{packet} * config_.values_per_packet;
  return {c.first + offset, std::min<std::size_t>(config_.values_per_packet, c.count - offset)};
}

std::uint32_t RingAllreduce::packets_in(const Tensor& t, std::uint32_t chunk_index) const {
  const std::size_t k = config_.values_per_packet;
  return static_cast<std::uint32_t>((chunk(t, chunk_index).count + k - 1) / k);
}

// The chunk worker `rank` sends at `step`: it receives chunk (rank - 1 - step) mod N.
std::uint32_t RingAllreduce::chunk_sent_at(std::uint32_t rank, std::uint32_t step) const {
  const std::uint32_t n = config_.workers;
  return (rank + n - step % n) % n;
}

std::uint32_t RingAllreduce::submit(Time, std::span<const float> input, std::span<float> output,
                                    Outbox& out) {
  const std::uint32_t id = next_id_++;
  Tensor& t = tensors_[id];
  t.submitted = true;
  t.output = output.data();
  t.values = input.size();
  t.sum.resize(4 * t.values);
  if (!quant::quantize_to_wire(input.data(), input.size(), config_.scale,
                               quant::sum_safe_magnitude(static_cast<int>(config_.workers)),
                               t.sum.data()) &&
      error_.empty())
    error_ = "ring allreduce: a gradient value does not fit int32 at the job's scale (the "
             "ring baseline carries int32 only)";
  const std::uint32_t predecessor = predecessor_rank();
  for (std::uint32_t step = 0; step < steps_; ++step)
    t.expected += packets_in(t, chunk_sent_at(predecessor, step));
  const std::uint32_t first = chunk_sent_at(config_.rank, 0);
  for (std::uint32_t p = 0; steps_ > 0 && p < packets_in(t, first); ++p)
    queue(id, t, 0, p);
  std::vector<std::vector<std::uint8_t>> early = std::move(t.early);
  for (const auto& packet : early) take_data(id, t, packet);
  if (t.received == t.expected) finish(id, t);
  pump(out);
  return id;
}

void RingAllreduce::on_packet(Time, std::span<const std::uint8_t> packet, Outbox& out,
                              NodeId) {
  if (!ring_destination(packet) || field(packet, kTo) != config_.self) {
    ++stats_.malformed;
    return;
  }
  if (field(packet, kKind) == kAck) {
    // Counts wrap at 2^32: serial-number order, as the window compares them.
    const std::uint32_t count = field(packet, kCount);
    if (seq_distance(count, acknowledged_) > 0) acknowledged_ = count;
    pump(out);
    return;
  }
  ++received_from_predecessor_;
  acknowledge(field(packet, kFrom), out);
  const std::uint32_t id = field(packet, kTensor);
  if (id < next_id_ && !tensors_.count(id)) {  // a finished tensor cannot take more data
    ++stats_.duplicate_results;
    return;
  }
  Tensor& t = tensors_[id];
  if (t.finished) {  // every packet of it already came: a stray copy
    ++stats_.duplicate_results;
    return;
  }
  if (!t.submitted) {
    t.early.emplace_back(packet.begin(), packet.end());
    return;
  }
  take_data(id, t, packet);
  if (t.received == t.expected) finish(id, t);
  pump(out);
}

// Adds (reduce-scatter) or copies (all-gather) one packet of the predecessor's chunk, then
// queues the same packet of the next step.
void RingAllreduce::take_data(std::uint32_t id, Tensor& t, std::span<const std::uint8_t> packet) {
  const std::uint32_t step = field(packet, kStep), p = field(packet, kPacket);
  const std::uint32_t predecessor = predecessor_rank();
  if (step >= steps_ || p >= packets_in(t, chunk_sent_at(predecessor, step))) {
    ++stats_.malformed;
    return;
  }
  const Span s = packet_span(t, chunk_sent_at(predecessor, step), p);
  if (field(packet, kCount) != s.count || packet.size() != kRingHeaderBytes + 4 * s.count) {
    ++stats_.malformed;
    return;
  }
  const std::uint8_t* in = packet.data() + kRingHeaderBytes;
  std::uint8_t* sum = t.sum.data() + 4 * s.first;
  if (step + 1 < config_.workers) {
    // Wrapping, as a switch adds: only a value past the job's scale (reported) can wrap.
    for (std::size_t i = 0; i < s.count; ++i)
      proto::store_be32(sum + 4 * i, proto::load_be32(sum + 4 * i) + proto::load_be32(in + 4 * i));
  } else {
    std::memcpy(sum, in, 4 * s.count);
  }
  ++t.received;
  if (step + 1 < steps_) queue(id, t, step + 1, p);
}

void RingAllreduce::queue(std::uint32_t id, Tensor& t, std::uint32_t step, std::uint32_t packet) {
  sends_.push_back({id, step, packet});
  ++t.queued;
}

void RingAllreduce::finish(std::uint32_t id, Tensor& t) {
  quant::dequantize_from_wire(t.sum.data(), t.values, config_.scale, t.output);
  ++stats_.results;
  completed_.push_back(id);
  t.finished = true;
  if (t.queued == 0) tensors_.erase(id);  // else its last queued send erases it
}

void RingAllreduce::pump(Outbox& out) {
  while (!sends_.empty() && static_cast<std::uint32_t>(sent_ - acknowledged_) < config_.window) {
    const Send s = sends_.front();
    sends_.pop_front();
    Tensor& t = tensors_.at(s.tensor);
    const Span span = packet_span(t, chunk_sent_at(config_.rank, s.step), s.packet);
    std::span<std::uint8_t> p = new_packet(out, config_.uplink, config_.self, config_.successor, kData, span.count);
    proto::store_be32(p.data() + kTensor, s.tensor);
    proto::store_be32(p.data() + kStep, s.step);
    proto::store_be32(p.data() + kPacket, s.packet);
    proto::store_be32(p.data() + kCount, static_cast<std::uint32_t>(span.count));
    std::memcpy(p.data() + kRingHeaderBytes, t.sum.data() + 4 * span.first, 4 * span.count);
    ++sent_;
    ++stats_.fragments_sent;
    if (--t.queued == 0 && t.finished) tensors_.erase(s.tensor);
  }
}

void RingAllreduce::acknowledge(NodeId to, Outbox& out) {
  std::span<std::uint8_t> p = new_packet(out, config_.uplink, config_.self, to, kAck, 0);
  proto::store_be32(p.data() + kCount, received_from_predecessor_);
}

std::vector<std::uint32_t> RingAllreduce::take_completed() {
  std::vector<std::uint32_t> done;
  done.swap(completed_);
  return done;
}

}  // namespace atp::sim
