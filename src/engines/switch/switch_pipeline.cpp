#include "engines/switch/switch_pipeline.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "proto/byte_order.h"

namespace atp::engines {

using proto::Level;
namespace flag = proto::flag;

std::string to_string(Policy p) {
  switch (p) {
    case Policy::atp: return "atp";
    case Policy::static_partition: return "static";
    case Policy::none: return "none";
  }
  return "unknown";
}

bool parse_policy(const std::string& text, Policy& out) {
  if (text == "atp") out = Policy::atp;
  else if (text == "static") out = Policy::static_partition;
  else if (text == "none") out = Policy::none;
  else return false;
  return true;
}

struct SwitchPipeline::Context {
  std::span<std::uint8_t> packet;
  proto::Header h;
  JobEntry* job = nullptr;
  std::uint32_t index = 0;
  bool has_aggregator = false;

  std::uint8_t* values() { return packet.data() + proto::kHeaderBytes; }
  AggregatorOwner owner() const { return {h.job, h.tensor, h.seq}; }
};

namespace {

// The ALU work of one pass: registers += packet values. Returns true if any addition left
// int32 (the result is then flagged as wrapped, never trusted).
bool add_packet_into_registers(std::int32_t* regs, const std::uint8_t* values, std::size_t n) {
  bool overflow = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t sum;
    overflow |= __builtin_add_overflow(regs[i], proto::load_be_i32(values + 4 * i), &sum);
    regs[i] = sum;
  }
  return overflow;
}

bool add_registers_into_packet(std::uint8_t* values, const std::int32_t* regs, std::size_t n) {
  bool overflow = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t sum;
    overflow |= __builtin_add_overflow(regs[i], proto::load_be_i32(values + 4 * i), &sum);
    proto::store_be_i32(values + 4 * i, sum);
  }
  return overflow;
}

void copy_packet_to_registers(std::int32_t* regs, const std::uint8_t* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) regs[i] = proto::load_be_i32(values + 4 * i);
}

void copy_registers_to_packet(std::uint8_t* values, const std::int32_t* regs, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) proto::store_be_i32(values + 4 * i, regs[i]);
}

Forwarding drop() { return {}; }

}  // namespace

SwitchPipeline::SwitchPipeline(SwitchConfig config)
    : config_(config), pool_(config.pool_size, config.values_per_aggregator) {
  if (config.level != Level::rack && config.level != Level::spine)
    throw std::invalid_argument("switch level must be 1 (rack) or 2 (spine)");
  if (config.values_per_aggregator == 0 || config.values_per_aggregator > proto::kMaxValues)
    throw std::invalid_argument("values per aggregator must be 1.." +
                                std::to_string(proto::kMaxValues));
  if (config.pool_size == 0 && config.policy != Policy::none)
    throw std::invalid_argument("aggregator pool must not be empty unless the policy is none");
}

void SwitchPipeline::add_job(SwitchJob job) {
  if (job.window == 0 || !std::has_single_bit(job.window) || job.window > (1u << 20))
    throw std::invalid_argument("job " + std::to_string(job.job) +
                                ": window must be a power of two up to 2^20");
  if (job.upstream.empty())
    throw std::invalid_argument("job " + std::to_string(job.job) + ": no upstream hop");
  if (job.fan_in == 0 || job.fan_in > proto::kMaxFanIn)
    throw std::invalid_argument("job " + std::to_string(job.job) + ": fan-in must be 1..32");
  if (std::uint64_t{job.static_first} + job.static_count > pool_.size())
    throw std::invalid_argument("job " + std::to_string(job.job) +
                                ": static slice exceeds the aggregator pool");
  remove_job(job.job);
  const std::uint32_t id = job.job;
  jobs_[id] = JobEntry{std::move(job), {}};
}

bool SwitchPipeline::remove_job(std::uint32_t job) {
  if (jobs_.erase(job) == 0) return false;
  for (std::uint32_t i = 0; i < pool_.size(); ++i)
    if (pool_.state(i).valid && pool_.state(i).owner.job == job) pool_.free(i);
  return true;
}

std::vector<std::uint32_t> SwitchPipeline::jobs() const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, entry] : jobs_) ids.push_back(id);
  return ids;
}

const SwitchJobCounters* SwitchPipeline::job_counters(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.counters;
}

Forwarding SwitchPipeline::process(std::span<std::uint8_t> packet, std::optional<NodeId> from,
                                   bool congested) {
  ++counters_.packets;
  Context c{packet, {}, nullptr, 0, false};
  if (proto::decode(packet, c.h) != proto::DecodeError::ok) {
    ++counters_.malformed;
    return drop();
  }
  auto it = jobs_.find(c.h.job);
  if (it == jobs_.end()) {
    ++counters_.unknown_job;
    return drop();
  }
  c.job = &it->second;
  const SwitchJob& job = c.job->config;
  if (!authentic(job, c.h, from)) {
    ++c.job->counters.forged;  // before anything is touched: no forgery frees or pollutes
    return drop();
  }
  if (job.upstream.size() != 1 && c.h.ps_index >= job.upstream.size()) {
    ++counters_.malformed;  // no route: refuse before touching any aggregator
    return drop();
  }
  // The start-up handshake passes every level untouched: up to PS 0, down to the asker.
  if (c.h.kind == proto::Kind::join) return forward_up(c);
  if (c.h.kind == proto::Kind::joined) return toward_asker(c);
  if (congested) c.h.set(flag::kEcn);
  c.has_aggregator = pick_aggregator(c);

  if (c.h.is_downward()) return handle_downward(c);
  // Not ours to aggregate: another level's packet, floats, or no aggregation at all.
  if (c.h.next_level != config_.level || c.h.has(flag::kOverflow) ||
      config_.policy == Policy::none)
    return forward_up(c);
  if (!c.has_aggregator) {
    // Static policy and the job has no slice here: the PS does all the work.
    if (!c.h.has(flag::kResend)) {
      ++c.job->counters.collisions;
      c.h.set(flag::kCollision);
    }
    return forward_up(c);
  }
  if (!fan_in_agrees(c)) return forward_up(c);
  if (c.h.has(flag::kResend)) return handle_resend(c);
  if (!aggregatable(c)) return forward_up(c);
  return handle_fragment(c);
}

// A job's packets carry its token and travel between its own members: upward from the workers
// (or rack switches) below, downward from the next hop up (the level-2 switch or its PSs).
bool SwitchPipeline::authentic(const SwitchJob& job, const proto::Header& h,
                               std::optional<NodeId> from) {
  if (h.token != job.token) return false;
  if (!from) return true;
  const auto& allowed = h.is_downward() ? job.upstream : job.downstream;
  return std::find(allowed.begin(), allowed.end(), *from) != allowed.end();
}

bool SwitchPipeline::pick_aggregator(Context& c) const {
  switch (config_.policy) {
    case Policy::none: return false;
    case Policy::atp: c.index = c.h.aggregator % pool_.size(); return true;
    case Policy::static_partition: {
      const SwitchJob& job = c.job->config;
      if (job.static_count == 0) return false;
      // SwitchML-style: slots map onto the slice in order, so a window no larger than the
      // slice never collides with itself.
      c.index = job.static_first + c.h.seq % job.static_count;
      return true;
    }
  }
  return false;
}

// Level 1 adds single workers' fragments; level 2 adds whole racks' sums. Anything else (a
// collided fragment, a partial flush) passes level 2 untouched for the PS to finish.
bool SwitchPipeline::aggregatable(const Context& c) const {
  if (c.h.value_count > pool_.width()) return false;
  if (config_.level == Level::rack)
    return c.h.racks_bitmap == 0 && std::popcount(c.h.workers_bitmap) == 1;
  return c.h.workers_bitmap == 0 && std::popcount(c.h.racks_bitmap) == 1;
}

bool SwitchPipeline::fan_in_agrees(Context& c) const {
  const std::uint8_t installed = c.job->config.fan_in;
  const std::uint8_t claimed = config_.level == Level::rack ? c.h.rack_fan_in : c.h.job_fan_in;
  if (installed == claimed) return true;
  ++c.job->counters.fan_in_mismatch;
  return false;
}

Forwarding SwitchPipeline::handle_fragment(Context& c) {
  AggregatorState& a = pool_.state(c.index);
  std::int32_t* regs = pool_.values(c.index);
  const std::size_t n = c.h.value_count;
  const bool rack_level = config_.level == Level::rack;
  const std::uint32_t bit = rack_level ? c.h.workers_bitmap : c.h.racks_bitmap;
  const unsigned fan_in = rack_level ? c.h.rack_fan_in : c.h.job_fan_in;
  SwitchJobCounters& counters = c.job->counters;

  // Held by this job for a seq a window back (which proves it finished), or by another run.
  const bool stale =
      a.valid && a.owner.job == c.h.job &&
      (seq_distance(c.h.seq, a.owner.seq) >= static_cast<std::int32_t>(c.job->config.window) ||
       proto::run_of(c.h.tensor) != proto::run_of(a.owner.tensor));
  if (!a.valid || stale) {
    if (stale) ++counters.stale_reclaimed;
    a = AggregatorState{};
    a.valid = true;
    a.owner = c.owner();
    a.value_count = c.h.value_count;
    copy_packet_to_registers(regs, c.values(), n);
  } else if (a.owner != c.owner() || a.value_count != c.h.value_count) {
    ++counters.collisions;
    c.h.set(flag::kCollision);
    return forward_up(c);
  } else if ((a.bitmap & bit) != 0) {
    ++counters.duplicates;
    // The sum may have been lost on its way up: send it again. A partial sum already holds
    // this contribution, so the copy adds nothing.
    return a.complete ? emit_sum(c, rack_level ? (1u << c.h.rack) : a.bitmap, 0) : drop();
  } else {
    a.wrapped |= add_packet_into_registers(regs, c.values(), n);
  }
  a.wrapped |= c.h.has(flag::kWrapped);
  a.ecn |= c.h.has(flag::kEcn);
  a.bitmap |= bit;
  ++a.count;
  ++counters.aggregated;
  if (a.count < fan_in) return drop();

  a.complete = true;
  ++counters.completed;
  return emit_sum(c, rack_level ? (1u << c.h.rack) : a.bitmap, 0);
}

Forwarding SwitchPipeline::emit_sum(Context& c, std::uint32_t racks, std::uint32_t workers) {
  const AggregatorState& a = pool_.state(c.index);
  copy_registers_to_packet(c.values(), pool_.values(c.index), c.h.value_count);
  c.h.racks_bitmap = racks;
  c.h.workers_bitmap = workers;
  c.h.set(flag::kEcn, a.ecn || c.h.has(flag::kEcn));
  c.h.set(flag::kWrapped, a.wrapped);
  c.h.set(flag::kCollision, false);
  c.h.next_level = level_after_me(c.h);
  return route_up(c);
}

Forwarding SwitchPipeline::handle_resend(Context& c) {
  AggregatorState& a = pool_.state(c.index);
  if (!a.valid || a.owner != c.owner() || a.value_count != c.h.value_count) return forward_up(c);
  const bool rack_level = config_.level == Level::rack;
  // Level 1 hears single workers; level 2 whole racks or one rack's part, never both at once.
  if (rack_level ? c.h.racks_bitmap != 0 || std::popcount(c.h.workers_bitmap) != 1
                 : c.h.racks_bitmap != 0 && c.h.workers_bitmap != 0)
    return forward_up(c);

  // What the flushed packet carries: the aggregator's contributors, plus the resent ones if
  // the aggregator does not hold them yet.
  std::uint32_t racks = 0, workers = 0;
  bool absent = false;
  if (rack_level) {
    absent = (a.bitmap & c.h.workers_bitmap) == 0;
    const std::uint32_t all = a.bitmap | (absent ? c.h.workers_bitmap : 0);
    const bool rack_complete = std::popcount(all) == c.h.rack_fan_in;
    racks = rack_complete ? (1u << c.h.rack) : 0;
    workers = rack_complete ? 0 : all;
  } else if (c.h.workers_bitmap == 0) {
    absent = (a.bitmap & c.h.racks_bitmap) == 0;
    racks = a.bitmap | (absent ? c.h.racks_bitmap : 0);
  } else {
    // Part of one rack: worth adding only if that rack's full sum is not here already.
    absent = (a.bitmap & (1u << c.h.rack)) == 0;
    racks = a.bitmap;
    workers = absent ? c.h.workers_bitmap : 0;
  }

  bool wrapped = a.wrapped;
  if (absent) {
    wrapped |= c.h.has(flag::kWrapped);
    wrapped |= add_registers_into_packet(c.values(), pool_.values(c.index), c.h.value_count);
  } else {
    copy_registers_to_packet(c.values(), pool_.values(c.index), c.h.value_count);
  }
  c.h.set(flag::kWrapped, wrapped);
  c.h.set(flag::kEcn, a.ecn || c.h.has(flag::kEcn));
  c.h.set(flag::kCollision, false);
  c.h.racks_bitmap = racks;
  c.h.workers_bitmap = workers;
  pool_.free(c.index);
  ++c.job->counters.flushes;
  return forward_up(c);
}

Forwarding SwitchPipeline::handle_downward(Context& c) {
  if (c.has_aggregator) {
    const AggregatorState& a = pool_.state(c.index);
    if (a.valid && a.owner == c.owner()) pool_.free(c.index);
  }
  proto::encode_flags_and_bitmaps(c.h, c.packet);
  ++c.job->counters.results_sent;
  return {Forwarding::Action::multicast, 0, c.job->config.downstream};
}

// A run handshake answer names one worker: level 2 sends it to that worker's rack switch, level
// 1 to the worker (downstream lists are in rack order and in rank-in-rack order).
Forwarding SwitchPipeline::toward_asker(Context& c) {
  const std::vector<NodeId>& below = c.job->config.downstream;
  const std::size_t index =
      config_.level == Level::rack ? std::countr_zero(c.h.workers_bitmap) : c.h.rack;
  if (index >= below.size()) {
    ++counters_.malformed;
    return drop();
  }
  ++c.job->counters.results_sent;
  return {Forwarding::Action::unicast, below[index], {}};
}

Forwarding SwitchPipeline::forward_up(Context& c) {
  if (c.h.next_level == config_.level) c.h.next_level = level_after_me(c.h);
  ++c.job->counters.forwarded_to_ps;
  return route_up(c);
}

// Toward the PS that owns this fragment (ps_index, checked on entry), or the single uplink.
Forwarding SwitchPipeline::route_up(Context& c) {
  const SwitchJob& job = c.job->config;
  proto::encode_flags_and_bitmaps(c.h, c.packet);
  const NodeId to = job.upstream.size() == 1 ? job.upstream[0] : job.upstream[c.h.ps_index];
  return {Forwarding::Action::unicast, to, {}};
}

Level SwitchPipeline::level_after_me(const proto::Header& h) const {
  if (config_.level == Level::rack && h.job_fan_in > 1) return Level::spine;
  return Level::parameter_server;
}

}  // namespace atp::engines
