#include "engines/switch/switch_pipeline.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <stdexcept>

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

Port port_of_node(NodeId node) {
  if (node >= 0xFFFF) throw std::out_of_range("node " + std::to_string(node) + " has no port number");
  return static_cast<Port>(node);
}

NodeId node_of_port(Port port) { return port; }

std::string to_string(const Verdict& v) {
  const std::string passes = v.passes == 1 ? "" : " after " + std::to_string(v.passes) + " passes";
  switch (v.action) {
    case Verdict::Action::drop: return "drop" + passes;
    case Verdict::Action::port: return "port " + std::to_string(v.port) + passes;
    case Verdict::Action::multicast:
      return "multicast group " + std::to_string(v.group) + passes;
  }
  return "unknown";
}

// One packet's metadata: the header fields the parser extracted and what each stage returned.
struct SwitchPipeline::Metadata {
  std::span<std::uint8_t> packet;
  proto::Header h;
  JobEntry* job = nullptr;
  std::size_t member = 0;       // upward: the ingress port's place among the job's downstream
  bool has_index = false;
  std::uint32_t index = 0;
  std::uint32_t bit = 0;        // the fragment's contributor bit at this level
  bool fan_in_mismatch = false;
  SeqOutcome owner = SeqOutcome::other;
  bool duplicate = false;
  std::uint32_t bitmap_after = 0;
  std::uint8_t count_after = 0;
  bool ecn_after = false;
  bool wrapped_after = false;
  std::uint32_t out_racks = 0, out_workers = 0;  // a flush's contributors
  std::uint8_t passes = 1;      // through a P4 switch's pipe: more once the value stages run

  std::span<std::uint8_t> values() { return proto::payload(packet); }
  OwnerTag tag() const { return OwnerTag::of(h.job, proto::run_of(h.tensor), h.seq, h.token); }
};

// What the classifier sends where.
enum class SwitchPipeline::PacketClass : std::uint8_t {
  join, answer, result, pass, collide, flush, aggregate
};

namespace {

// The contributor-index table: P4 matches the bitmap exactly against its 32 one-bit values.
bool single_contributor(std::uint32_t bitmap) { return std::has_single_bit(bitmap); }

Verdict to_port(Port p) { return {Verdict::Action::port, p, 0}; }

}  // namespace

ClaimClock claim_clock(Time now, Duration stale_after) {
  return {static_cast<std::uint32_t>(2 + now / (stale_after / 2))};
}

SwitchPipeline::SwitchPipeline(SwitchConfig config)
    : config_(config), registers_(config.pool_size, config.values_per_pass, config.passes) {
  if (config.level != Level::rack && config.level != Level::spine)
    throw std::invalid_argument("switch level must be 1 (rack) or 2 (spine)");
  if (config.values_per_pass == 0 || config.passes == 0 ||
      config.values_per_packet() > proto::kMaxValues)
    throw std::invalid_argument("values per pass x passes must be 1.." +
                                std::to_string(proto::kMaxValues));
  if (config.pool_size == 0 && config.policy != Policy::none)
    throw std::invalid_argument("aggregator pool must not be empty unless the policy is none");
  if (config.stale_after < (Duration{1} << 16) || config.stale_after > 3600 * kSecond)
    throw std::invalid_argument("stale_after must be 66 us .. 1 h");
}

void SwitchPipeline::add_job(SwitchJob job) {
  const std::string name = "job " + std::to_string(job.job);
  if (job.job > kMaxSwitchJobId)
    throw std::invalid_argument(name + ": switch job ids are 0.." + std::to_string(kMaxSwitchJobId));
  if (job.window == 0 || !std::has_single_bit(job.window) || job.window > (1u << 20))
    throw std::invalid_argument(name + ": window must be a power of two up to 2^20");
  if (job.upstream.empty()) throw std::invalid_argument(name + ": no upstream port");
  if (job.fan_in == 0 || job.fan_in > proto::kMaxFanIn)
    throw std::invalid_argument(name + ": fan-in must be 1..32");
  if (std::uint64_t{job.static_first} + job.static_count > registers_.size())
    throw std::invalid_argument(name + ": static slice exceeds the aggregator pool");
  if (job.multicast_group == 0) throw std::invalid_argument(name + ": no multicast group");
  for (const auto& [id, entry] : jobs_)
    if (id != job.job && entry.config.multicast_group == job.multicast_group)
      throw std::invalid_argument(name + ": multicast group " +
                                  std::to_string(job.multicast_group) + " belongs to job " +
                                  std::to_string(id));
  remove_job(job.job);
  const std::uint32_t id = job.job;
  groups_[job.multicast_group] = job.downstream;
  group_jobs_[job.multicast_group] = id;
  std::vector<bool> heard(job.downstream.size(), false);
  jobs_[id] = JobEntry{std::move(job), {}, std::move(heard)};
}

bool SwitchPipeline::remove_job(std::uint32_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  groups_.erase(it->second.config.multicast_group);
  group_jobs_.erase(it->second.config.multicast_group);
  jobs_.erase(it);
  registers_.free_job(job);
  return true;
}

std::vector<std::uint32_t> SwitchPipeline::jobs() const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, entry] : jobs_) ids.push_back(id);
  return ids;
}

std::span<const Port> SwitchPipeline::multicast_ports(MulticastGroupId group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? std::span<const Port>{} : std::span<const Port>{it->second};
}

const std::vector<bool>* SwitchPipeline::heard_members(MulticastGroupId group) const {
  const auto owner = group_jobs_.find(group);
  if (owner == group_jobs_.end()) return nullptr;
  return &jobs_.at(owner->second).heard;
}

const SwitchJob* SwitchPipeline::job(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.config;
}

const SwitchJobCounters* SwitchPipeline::job_counters(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.counters;
}

Verdict SwitchPipeline::process(std::span<std::uint8_t> packet, Port ingress_port, Time now,
                                bool congested) {
  const Verdict v = ingress(packet, ingress_port, now);
  if (v.action != Verdict::Action::drop) egress(packet, congested);
  return v;
}

Verdict SwitchPipeline::ingress(std::span<std::uint8_t> packet, Port ingress_port, Time now) {
  Metadata m;
  m.packet = packet;
  const NextStep step = decide(m, ingress_port, now);
  count(step, m);
  Verdict v = apply(step, m);
  v.passes = m.passes;
  return v;
}

NextStep SwitchPipeline::decide(Metadata& m, Port ingress_port, Time now) {
  if (auto refused = parse_and_check(m, ingress_port)) return *refused;
  if (!m.h.is_downward()) m.job->heard[m.member] = true;
  switch (classify(m)) {
    case PacketClass::join: return NextStep::join_up;
    case PacketClass::answer: return NextStep::answer_down;
    case PacketClass::result:
      free_on_result(m);
      return m.h.is_addressed_result() ? NextStep::answer_down : NextStep::multicast_down;
    case PacketClass::pass: return NextStep::pass_up;
    case PacketClass::collide: return NextStep::collide_up;
    case PacketClass::flush: return flush(m);
    case PacketClass::aggregate: return aggregate(m, now);
  }
  return NextStep::drop_malformed;
}

// Parser, job table and the tenant checks: a refusal here touches no register.
std::optional<NextStep> SwitchPipeline::parse_and_check(Metadata& m, Port ingress_port) {
  if (proto::decode(m.packet, m.h) != proto::DecodeError::ok) return NextStep::drop_malformed;
  auto it = jobs_.find(m.h.job);
  if (it == jobs_.end()) return NextStep::drop_unknown_job;
  m.job = &it->second;
  const SwitchJob& job = m.job->config;
  // A job's packets carry its token and travel between its own members: upward from the
  // ports below, downward from the ports toward the PS.
  const auto& allowed = m.h.is_downward() ? job.upstream : job.downstream;
  const auto from = std::find(allowed.begin(), allowed.end(), ingress_port);
  if (m.h.token != job.token || from == allowed.end()) return NextStep::drop_forged;
  // A member speaks for itself alone: at level 1 a worker's packet names its own rank's bit
  // and no rack; at level 2 a rack switch's names its own rack. Another member's bit would
  // let one port complete seqs, and ask for results, in the others' names.
  if (!m.h.is_downward()) {
    m.member = static_cast<std::size_t>(from - allowed.begin());
    const std::uint32_t own = 1u << m.member;
    const bool itself = config_.level == Level::rack
                            ? m.h.racks_bitmap == 0 && m.h.workers_bitmap == own
                            : (m.h.racks_bitmap & ~own) == 0 && (m.h.workers_bitmap == 0 || m.h.rack == m.member);
    if (!itself) return NextStep::drop_forged;
  }
  if (job.upstream.size() != 1 && m.h.ps_index >= job.upstream.size())
    return NextStep::drop_malformed;
  // A run-handshake answer and a late copy for one worker name one member: level 2 its rack,
  // level 1 its bit (downstream lists are in rack order and in rank-in-rack order).
  if ((m.h.kind == proto::Kind::joined || m.h.is_addressed_result()) &&
      (config_.level == Level::rack ? std::countr_zero(m.h.workers_bitmap) : m.h.rack) >=
          static_cast<int>(job.downstream.size()))
    return NextStep::drop_malformed;
  return std::nullopt;
}

// Which path the packet takes, from the header and the job entry alone (a P4 table on the
// packet's flags, level and shape).
SwitchPipeline::PacketClass SwitchPipeline::classify(Metadata& m) const {
  const proto::Header& h = m.h;
  if (h.kind == proto::Kind::join) return PacketClass::join;
  if (h.kind == proto::Kind::joined) return PacketClass::answer;
  // A result query is the PS's alone, whatever level it names: no aggregator, no flag.
  if (h.kind == proto::Kind::query) return PacketClass::pass;
  m.has_index = aggregator_index(m);
  if (h.is_downward()) {
    // A resend request passes while some contributions are on their way up again: the
    // aggregator it names may hold a rack's partial sum the PS still needs. It frees nothing.
    if (h.is_resend_request()) m.has_index = false;
    return PacketClass::result;
  }
  // Not ours to aggregate: another level's packet, floats, or no aggregation at all.
  if (h.next_level != config_.level || h.has(flag::kFloatPayload) || config_.policy == Policy::none)
    return PacketClass::pass;
  // Static policy and the job has no slice here: the PS does all the work.
  if (!m.has_index) return h.has(flag::kResend) ? PacketClass::pass : PacketClass::collide;
  const bool rack_level = config_.level == Level::rack;
  const std::uint8_t claimed = rack_level ? h.rack_fan_in : h.job_fan_in;
  if (claimed != m.job->config.fan_in) {
    m.fan_in_mismatch = true;
    return PacketClass::pass;
  }
  if (h.has(flag::kResend)) {
    // Level 1 hears single workers; level 2 whole racks or one rack's part, never both.
    const bool shaped = rack_level ? h.racks_bitmap == 0 && single_contributor(h.workers_bitmap)
                                   : h.racks_bitmap == 0 || h.workers_bitmap == 0;
    return shaped ? PacketClass::flush : PacketClass::pass;
  }
  // Level 1 adds single workers' fragments; level 2 whole racks' sums. Anything else (a
  // collided fragment, a partial flush) passes level 2 untouched for the PS to finish.
  if (h.value_count > config_.values_per_packet()) return PacketClass::pass;
  const std::uint32_t own = rack_level ? h.workers_bitmap : h.racks_bitmap;
  const std::uint32_t other = rack_level ? h.racks_bitmap : h.workers_bitmap;
  if (other != 0 || !single_contributor(own)) return PacketClass::pass;
  m.bit = own;
  return PacketClass::aggregate;
}

bool SwitchPipeline::aggregator_index(Metadata& m) const {
  switch (config_.policy) {
    case Policy::none: return false;
    case Policy::atp: m.index = m.h.aggregator % registers_.size(); return true;
    case Policy::static_partition: {
      const SwitchJob& job = m.job->config;
      if (job.static_count == 0) return false;
      // SwitchML-style: slots map onto the slice in order, so a window no larger than the
      // slice never collides with itself.
      m.index = job.static_first + m.h.seq % job.static_count;
      return true;
    }
  }
  return false;
}

// A fragment of this level: claim or join the aggregator, one register stage after another.
NextStep SwitchPipeline::aggregate(Metadata& m, Time now) {
  const std::uint32_t i = m.index;
  const OwnerTag tag = m.tag();
  m.owner = registers_.owner_seq_claim_or_match(i, tag.lo, claim_clock(now, config_.stale_after));
  if (m.owner == SeqOutcome::other) return NextStep::collide_up;
  const bool claiming = m.owner != SeqOutcome::same_seq;
  if (claiming) registers_.owner_id_write(i, tag.hi);
  else if (!registers_.owner_id_matches(i, tag.hi)) return NextStep::collide_up;
  if (!registers_.value_count_matches(i, claiming, m.h.value_count)) return NextStep::collide_up;

  const std::uint32_t before = registers_.bitmap_before(i, claiming ? Update::start : Update::add,
                                                        m.bit);
  m.duplicate = (before & m.bit) != 0;
  m.bitmap_after = before | m.bit;
  const Update u = claiming ? Update::start : m.duplicate ? Update::read : Update::add;
  m.count_after = registers_.count_after(i, u);
  m.ecn_after = registers_.ecn_after(i, u, m.h.has(flag::kEcn));
  const bool overflow = values_stages(m, u, /*into_packet=*/false);
  m.wrapped_after = registers_.wrapped_after(i, u, m.h.has(flag::kWrapped) || overflow);

  const bool complete = m.count_after >= m.job->config.fan_in;
  // A duplicate of a complete sum: the sum may have been lost on its way up, send it again.
  // (Below a level 2 the sum is released as it leaves, so a late duplicate claims afresh.)
  if (m.duplicate) return complete ? NextStep::emit_sum : NextStep::drop_duplicate;
  if (!complete) return NextStep::absorb;
  // A level 2 above holds the rack's sum from here on (it sends it again for a resend, and the
  // result frees it there), so the aggregator is freed as the sum leaves. Kept until the result,
  // a sum that another rack's loss delays made every later seq of the job planned on it collide,
  // one packet per worker to the PS. A Tofino decides the owner stage before the count stage:
  // the free happens in the packet's last pass, a second one for a packet of one pass.
  if (level_after_me(m.h) == Level::spine) {
    registers_.owner_seq_match_and_free(i, tag.lo);
    m.passes = std::max(m.passes, kReleasePasses);
  }
  return NextStep::emit_sum;
}

// A resend at this level: free the aggregator it names and carry its partial sum up, with
// the resent contribution added if the aggregator does not hold it yet.
NextStep SwitchPipeline::flush(Metadata& m) {
  const std::uint32_t i = m.index;
  if (!owner_match_and_free(m)) return NextStep::pass_up;
  // A size disagreement with the same tag comes only from a broken sender: the partial sum
  // is dropped (the aggregator is free already) and the resend goes on as it is.
  if (!registers_.value_count_matches(i, false, m.h.value_count)) return NextStep::pass_up;
  const bool rack_level = config_.level == Level::rack;
  const std::uint32_t before = registers_.bitmap_before(i, Update::read, 0);
  // The resent contributor as the aggregator's bitmap names it: a worker (level 1), a rack
  // (level 2), or for part of a rack at level 2, that rack.
  const std::uint32_t named = rack_level                ? m.h.workers_bitmap
                              : m.h.workers_bitmap == 0 ? m.h.racks_bitmap
                                                        : 1u << m.h.rack;
  const bool absent = (before & named) == 0;
  const std::uint8_t count = registers_.count_after(i, Update::read);
  m.ecn_after = registers_.ecn_after(i, Update::read, false) || m.h.has(flag::kEcn);
  const bool overflow = values_stages(m, Update::read, /*into_packet=*/absent);
  m.wrapped_after = registers_.wrapped_after(i, Update::read, false) ||
                    (absent && (m.h.has(flag::kWrapped) || overflow));

  if (rack_level) {
    const std::uint32_t all = before | (absent ? named : 0);
    const bool rack_complete = count + (absent ? 1 : 0) == m.job->config.fan_in;
    m.out_racks = rack_complete ? 1u << m.h.rack : 0;
    m.out_workers = rack_complete ? 0 : all;
  } else if (m.h.workers_bitmap == 0) {
    m.out_racks = before | (absent ? named : 0);
  } else {
    // Part of one rack: worth adding only if that rack's full sum is not here already.
    m.out_racks = before;
    m.out_workers = absent ? m.h.workers_bitmap : 0;
  }
  return NextStep::flush_up;
}

void SwitchPipeline::free_on_result(Metadata& m) {
  if (m.has_index) owner_match_and_free(m);
}

// The seq stage frees what holds the packet's keyed seq (only its own job's: OwnerTag); the
// identity stage says whether it was this run's.
bool SwitchPipeline::owner_match_and_free(Metadata& m) {
  const OwnerTag tag = m.tag();
  return registers_.owner_seq_match_and_free(m.index, tag.lo) &&
         registers_.owner_id_matches(m.index, tag.hi);
}

// The value stages, one register array per pass: pass p takes lanes [p K', (p + 1) K').
// `into_packet` (a flush of an absent contribution) adds the registers into the packet only.
// On a P4 switch the lanes run in passes of their own (passes_for), which the verdict says.
bool SwitchPipeline::values_stages(Metadata& m, Update u, bool into_packet) {
  m.passes = passes_for(m.h.value_count);
  bool overflow = false;
  const std::size_t pass_bytes = std::size_t{config_.values_per_pass} * proto::kValueBytes;
  for (std::uint32_t pass = 0; pass < config_.passes; ++pass) {
    const std::size_t first = pass * pass_bytes;
    if (first >= m.values().size()) break;
    const std::size_t length = std::min(pass_bytes, m.values().size() - first);
    auto lanes = m.values().subspan(first, length);
    overflow |= into_packet ? registers_.values_pass_into_packet(pass, m.index, lanes)
                            : registers_.values_pass(pass, m.index, u, lanes);
  }
  return overflow;
}

// The next-step stage's action: rewrite the header as the decision says, pick the egress.
Verdict SwitchPipeline::apply(NextStep step, Metadata& m) {
  proto::Header& h = m.h;
  const bool upward = step == NextStep::pass_up || step == NextStep::collide_up ||
                      step == NextStep::flush_up || step == NextStep::join_up ||
                      step == NextStep::emit_sum;
  switch (step) {
    case NextStep::collide_up: h.set(flag::kCollision); break;
    case NextStep::emit_sum:
      h.racks_bitmap = config_.level == Level::rack ? 1u << h.rack : m.bitmap_after;
      h.workers_bitmap = 0;
      h.set(flag::kEcn, m.ecn_after || h.has(flag::kEcn));
      h.set(flag::kWrapped, m.wrapped_after);
      h.set(flag::kCollision, false);
      h.next_level = level_after_me(h);
      break;
    case NextStep::flush_up:
      h.racks_bitmap = m.out_racks;
      h.workers_bitmap = m.out_workers;
      h.set(flag::kEcn, m.ecn_after);
      h.set(flag::kWrapped, m.wrapped_after);
      h.set(flag::kCollision, false);
      break;
    case NextStep::multicast_down:
      return {Verdict::Action::multicast, 0, m.job->config.multicast_group};
    case NextStep::answer_down: {
      const auto member = config_.level == Level::rack ? std::countr_zero(h.workers_bitmap)
                                                       : int{h.rack};
      return to_port(m.job->config.downstream[static_cast<std::size_t>(member)]);
    }
    default: break;
  }
  if (!upward) return {};
  // Toward the PS that owns this fragment (ps_index, checked on entry), or the single uplink.
  if (h.next_level == config_.level) h.next_level = level_after_me(h);
  proto::encode_flags_and_bitmaps(h, m.packet);
  const SwitchJob& job = m.job->config;
  return to_port(job.upstream.size() == 1 ? job.upstream[0] : job.upstream[h.ps_index]);
}

// Every counter, in one place, from the decision and the stages' metadata.
void SwitchPipeline::count(NextStep step, const Metadata& m) {
  ++counters_.packets;
  if (step == NextStep::drop_malformed) ++counters_.malformed;
  if (step == NextStep::drop_unknown_job) ++counters_.unknown_job;
  if (m.job == nullptr) return;
  SwitchJobCounters& c = m.job->counters;
  const bool contribution = step == NextStep::absorb || (step == NextStep::emit_sum && !m.duplicate);
  c.forged += step == NextStep::drop_forged;
  c.fan_in_mismatch += m.fan_in_mismatch;
  c.collisions += step == NextStep::collide_up;
  c.forwarded_up += step == NextStep::pass_up || step == NextStep::collide_up ||
                    step == NextStep::flush_up || step == NextStep::join_up;
  c.flushes += step == NextStep::flush_up;
  c.aggregated += contribution;
  c.completed += step == NextStep::emit_sum && !m.duplicate;
  c.duplicates += m.duplicate;
  c.expired += contribution && m.owner == SeqOutcome::taken_over;
  c.results_sent += step == NextStep::multicast_down || step == NextStep::answer_down;
}

void SwitchPipeline::egress(std::span<std::uint8_t> packet, bool congested) {
  if (congested && proto::mark_ecn(packet)) ++counters_.ecn_marked;
}

Level SwitchPipeline::level_after_me(const proto::Header& h) const {
  if (config_.level == Level::rack && h.job_fan_in > 1) return Level::spine;
  return Level::parameter_server;
}

}  // namespace atp::engines
