#include "engines/ps/parameter_server.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

#include "engines/recovery_lead.h"
#include "engines/vector_clones.h"
#include "proto/aggregator_index.h"
#include "proto/byte_order.h"
#include "quant/quantizer.h"

namespace atp::engines {

namespace flag = proto::flag;

namespace {

// The owner a fragment names, as its entry keeps it (0: an allreduce's fragment).
std::uint32_t owner_mark_of(const proto::Header& h) {
  const auto owner = proto::decode_result_owner(h.remap_index);
  return owner ? proto::encode_result_owner(*owner) : 0;
}

}  // namespace

std::uint64_t ParameterServer::memory_bound(const PsJob& config) {
  std::uint64_t workers = 0;
  for (auto w : config.workers_per_rack) workers += w;
  const std::uint64_t k = config.values_per_packet;
  const std::uint64_t per_entry = sizeof(Entry) + k * sizeof(std::int64_t) +
                                  proto::kHeaderBytes + k * proto::kValueBytes +
                                  workers * k * sizeof(float);
  return std::uint64_t{2} * ring_or_default(config.window, config.ring) * per_entry;
}

void ParameterServer::add_job(PsJob config) {
  const std::string name = "job " + std::to_string(config.job) + ": ";
  if (config.workers_per_rack.empty() || config.workers_per_rack.size() > proto::kMaxFanIn)
    throw std::invalid_argument(name + "needs 1..32 racks");
  for (auto w : config.workers_per_rack)
    if (w == 0 || w > proto::kMaxFanIn)
      throw std::invalid_argument(name + "each rack needs 1..32 workers");
  if (config.window == 0 || !std::has_single_bit(config.window) || config.window > kMaxRing)
    throw std::invalid_argument(name + "window must be a power of two up to 2^20");
  if (!valid_ring(config.window, config.ring))
    throw std::invalid_argument(name + "ring must be a power of two from window up to 2^20");
  if (config.parameter_servers == 0 || config.parameter_servers > 256 ||
      config.ps_index >= config.parameter_servers)
    throw std::invalid_argument(name + "ps_index must be below parameter_servers (1..256)");
  if (config.values_per_packet == 0 || config.values_per_packet > proto::kMaxValues)
    throw std::invalid_argument(name + "values_per_packet must be 1.." +
                                std::to_string(proto::kMaxValues));

  Job job;
  for (auto w : config.workers_per_rack) {
    job.worker_offset.push_back(job.workers);
    job.full_masks.push_back(proto::low_bits(w));
    job.workers += w;
  }
  job.ring = ring_or_default(config.window, config.ring);
  job.entries.resize(std::size_t{job.ring} * 2);
  const std::uint32_t plan_shards = std::max(1u, config.home.shards);
  job.planner = AggregatorPlanner(
      {config.pool_size, config.home.first, config.home.count, config.window,
       plan_lag(config.window, job.ring), plan_shards, config.ps_index % plan_shards,
       config.borrow});
  job.runs = RunRegistry(config.first_run, job.workers);
  job.config = std::move(config);
  const std::uint32_t id = job.config.job;
  jobs_[id] = std::move(job);
}

bool ParameterServer::remove_job(std::uint32_t job) { return jobs_.erase(job) != 0; }

bool ParameterServer::set_home(std::uint32_t job, const HomeSlice& home) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  it->second.config.home.first = home.first;
  it->second.config.home.count = home.count;
  it->second.planner.set_home(it->second.config.home);
  return true;
}

std::vector<std::uint32_t> ParameterServer::jobs() const {
  std::vector<std::uint32_t> ids;
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

const PsJob* ParameterServer::job(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.config;
}

const PsJobCounters* ParameterServer::job_counters(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second.counters;
}

std::size_t ParameterServer::entries_in_use(std::uint32_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  return std::count_if(it->second.entries.begin(), it->second.entries.end(),
                       [](const Entry& e) { return e.used; });
}

void ParameterServer::on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                                std::optional<NodeId> from) {
  now_ = now;
  proto::Header h;
  Job* job = admit(packet, from, h);
  if (job == nullptr) return;
  ++job->counters.packets_in;
  job->counters.bytes_in += packet.size();
  if (h.kind == proto::Kind::join) return answer_join(*job, h, now, out);
  if (h.kind == proto::Kind::query) return answer_query(*job, h, out);
  const ContributorSet who = ContributorSet::of(h, job->full_masks);
  note_moved_on(*job, h, who);
  Entry* e = entry_for(*job, h);
  if (e == nullptr) {
    ++job->counters.stale;
    return;
  }
  if (h.value_count != e->value_count || owner_mark_of(h) != e->owner_mark) {
    ++job->counters.rejected;
    return;
  }
  if (e->complete) {
    if (answer_late(*job, *e, who, out)) ++job->counters.late_results;
    return;
  }
  e->ecn |= h.has(flag::kEcn);
  if (h.has(flag::kCollision)) {
    e->collided = true;
    ++job->counters.collided;
  }
  if (took_floats(*job, *e, h, packet, out)) return;
  add_contribution(*job, *e, h, who, packet, out);
  if (h.has(flag::kResend) && !e->complete) request_missing(*job, *e, out);
}

// Decode and the tenant checks; the job the packet belongs to, or null (counted).
ParameterServer::Job* ParameterServer::admit(std::span<const std::uint8_t> packet,
                                             std::optional<NodeId> from, proto::Header& h) {
  if (proto::decode(packet, h) != proto::DecodeError::ok || h.is_downward()) {
    ++counters_.malformed;
    return nullptr;
  }
  auto it = jobs_.find(h.job);
  if (it == jobs_.end()) {
    ++counters_.unknown_job;
    return nullptr;
  }
  Job& job = it->second;
  if (h.token != job.config.token || (from && *from != job.config.downstream)) {
    ++job.counters.forged;
    return nullptr;
  }
  if (h.ps_index != job.config.ps_index) {
    ++counters_.misrouted;
    return nullptr;
  }
  if (!consistent(job, h)) {
    ++job.counters.rejected;
    return nullptr;
  }
  return &job;
}

// A seq in float mode takes only floats; a float or wrapped packet moves it there. Returns
// whether the packet was handled so.
bool ParameterServer::took_floats(Job& job, Entry& e, const proto::Header& h,
                                  std::span<const std::uint8_t> packet, Outbox& out) {
  const bool float_payload = h.has(flag::kFloatPayload);
  if (e.float_mode) {
    if (float_payload)
      add_floats(job, e, h, packet, out);
    else
      send_float_request(job, e, out);  // its senders have not heard yet
    return true;
  }
  if (!float_payload && !h.has(flag::kWrapped)) return false;
  enter_float_mode(job, e, out);
  if (float_payload) add_floats(job, e, h, packet, out);
  return true;
}

// An integer contribution: added if disjoint from what the entry holds.
void ParameterServer::add_contribution(Job& job, Entry& e, const proto::Header& h,
                                       const ContributorSet& who,
                                       std::span<const std::uint8_t> packet, Outbox& out) {
  if (!e.held.disjoint(who)) {
    // Overlap is never added. But a sum that includes everything held (a rack sum arriving
    // after one of its workers' collided fragments) replaces it whole: exact, and it saves
    // the job a round of resends.
    const bool strict_superset = who.includes(e.held) && !e.held.includes(who);
    if (!strict_superset) {
      ++job.counters.duplicates;
      return;
    }
    std::fill(e.sum.begin(), e.sum.end(), 0);
    e.held.clear();
    e.parts = 0;
    ++job.counters.superseded;
  }
  add_integers(e, h, packet);
  e.held.add(who);
  ++e.parts;
  ++job.counters.contributions;
  if (e.held.covers(job.full_masks)) finish_integers(job, e, out);
}

// The header must describe this job as configured: same racks, same rack sizes, K at most.
bool ParameterServer::consistent(const Job& job, const proto::Header& h) const {
  const auto racks = job.config.workers_per_rack.size();
  if (h.job_fan_in != racks || h.value_count > job.config.values_per_packet) return false;
  if (h.rack_fan_in != job.config.workers_per_rack[h.rack]) return false;
  // A reduce-scatter shard's owner must be a worker of the job.
  if (h.kind == proto::Kind::fragment && (h.remap_index & proto::kResultOwner) != 0) {
    const auto owner = proto::decode_result_owner(h.remap_index);
    if (!owner || owner->rack >= racks ||
        owner->rank_in_rack >= job.config.workers_per_rack[owner->rack])
      return false;
  }
  return true;
}

// Each answer names one worker (rack, bit and nonce); the switches deliver it to that worker.
void ParameterServer::answer_join(Job& job, const proto::Header& h, Time now, Outbox& out) {
  ++job.counters.joins;
  if (job.config.ps_index != 0) {
    ++job.counters.rejected;  // runs are PS 0's to hand out
    return;
  }
  const unsigned bit = std::countr_zero(h.workers_bitmap);
  const std::uint32_t worker = job.worker_offset[h.rack] + bit;
  const std::uint16_t current = job.runs.run();
  const bool claim = (h.remap_index & proto::kRunClaim) != 0;
  const RunRegistry::Answer answer =
      claim ? job.runs.claim(worker, h.seq, static_cast<std::uint16_t>(h.remap_index))
            : job.runs.join(worker, h.seq, now);
  if (job.runs.run() != current && !claim) ++job.counters.runs_started;
  switch (answer.verdict) {
    case RunRegistry::Verdict::wait: return;
    case RunRegistry::Verdict::refuse:
      ++job.counters.runs_refused;
      send_joined(job, h.rack, bit, h.seq, answer.run, out, true);
      return;
    case RunRegistry::Verdict::answer_asker:
      send_joined(job, h.rack, bit, h.seq, answer.run, out);
      return;
    case RunRegistry::Verdict::answer_all:
      for (std::uint8_t rack = 0; rack < job.config.workers_per_rack.size(); ++rack)
        for (unsigned bit = 0; bit < job.config.workers_per_rack[rack]; ++bit)
          send_joined(job, rack, bit, *job.runs.nonce(job.worker_offset[rack] + bit), answer.run,
                      out);
      return;
  }
}

void ParameterServer::send_joined(const Job& job, std::uint8_t rack, unsigned bit,
                                  std::uint32_t nonce, std::uint16_t run, Outbox& out,
                                  bool refused) {
  proto::Header h;
  h.kind = proto::Kind::joined;
  h.next_level = proto::Level::parameter_server;
  h.ps_index = job.config.ps_index;
  h.job = job.config.job;
  h.token = job.config.token;
  h.tensor = proto::wire_tensor(run, 0);
  h.seq = nonce;
  h.remap_index = refused ? proto::kRunRefused : 0;
  h.rack = rack;
  h.workers_bitmap = 1u << bit;
  h.rack_fan_in = job.config.workers_per_rack[rack];
  h.job_fan_in = static_cast<std::uint8_t>(job.config.workers_per_rack.size());
  proto::encode(h, out.add(job.config.downstream, h.packet_bytes()));
}

// A worker has no result for the seq and asks, carrying no values: the result was lost on its
// way down to it, or the seq's recovery stalled. Sent again if kept. For a short seq, the asker
// is asked if its values are what is missing, even if it was asked before (the request or its
// resend was lost), and whatever else is missing is asked once, as after a resend. Asking the
// others again at every query (every worker of the job may query the same seq) measured worse
// at 5 % loss on one rack: 0.43 of lossless instead of 0.50. With nothing of the seq here, the
// asker is asked: its resend flushes what its switches hold. A query for a seq this server
// moved past is stale, as a late resend would be.
void ParameterServer::answer_query(Job& job, const proto::Header& h, Outbox& out) {
  ++job.counters.queries;
  if (!within_query_budget(job, h)) {
    ++job.counters.queries_over_budget;
    return;
  }
  Entry* e = kept_entry(job, h);
  if (e == nullptr) {
    if (behind_kept_state(job, h)) {
      ++job.counters.stale;
      return;
    }
    send_resend_request(job, h.tensor, h.seq, h.aggregator, h.rack, h.workers_bitmap, out);
    return;
  }
  if (e->complete) {
    ContributorSet asker;
    asker.add(h.rack, h.workers_bitmap);
    if (answer_late(job, *e, asker, out)) ++job.counters.answered_queries;
    return;
  }
  if (e->float_mode) return send_float_request(job, *e, out);
  if (!e->held.contains(h.rack, std::countr_zero(h.workers_bitmap))) {
    send_resend_request(job, e->tensor, e->seq, e->aggregator, h.rack, h.workers_bitmap, out);
    e->asked.add(h.rack, h.workers_bitmap);
  }
  request_missing(job, *e, out);
}

// Spends one of the asker's answers (Job::query_budgets; the switch lets a worker's port name
// only its own bit, so the asker is who it says). A token bucket: kQueryBurstRings rings at
// once, refilled at that many per kQueryBudgetPeriod.
bool ParameterServer::within_query_budget(Job& job, const proto::Header& h) {
  const std::size_t worker = job.worker_offset[h.rack] + std::countr_zero(h.workers_bitmap);
  if (job.query_budgets.size() != job.workers) job.query_budgets.assign(job.workers, {});
  if (worker >= job.query_budgets.size()) return false;
  const double burst = double(kQueryBurstRings) * job.ring;
  QueryBudget& b = job.query_budgets[worker];
  b.left = !b.started ? burst : std::min(burst, b.left + double(now_ - b.at) / kQueryBudgetPeriod * burst);
  b.started = true;
  b.at = now_;
  if (b.left < 1) return false;
  b.left -= 1;
  return true;
}

// Someone resent or asked after the result left: it was lost on the way down, or the asker's
// timer ran out before it arrived. The seq's recovery lead (recovery_lead.h) asks for every
// worker (the others wait for its recovery), and so do several askers at once (a flush
// carrying a rack's partial sum): one copy goes to every worker, and answers every later asker
// too, until one asks again (it lost that copy as well). Any other worker asks for itself: its
// copy is addressed to it alone (Header::is_addressed_result). A copy to every worker for each
// such ask cost a spurious timeout one result per worker on the downlinks, and those copies
// were most of the load in the congestion collapses of the random scenarios (docs/simulator.md).
// (Counting the askers afresh from each copy to all sends fewer copies, but under loss a worker
// whose copy was lost then waits for a second timer: tuning seeds 1001-1100, resends per lost
// packet 2.29 -> 2.87, timeouts 0.53 -> 0.67.)
bool ParameterServer::answer_late(Job& job, Entry& e, const ContributorSet& askers,
                                  Outbox& out) {
  const bool again = !e.late_askers.disjoint(askers);
  e.late_askers.add(askers);
  if (e.copied_to_all && !again) {
    ++job.counters.late_asks_covered;
    return false;
  }
  unsigned rack = 0, worker = 0;
  const bool one = askers.single(rack, worker);
  const auto racks = static_cast<std::uint32_t>(job.config.workers_per_rack.size());
  const bool lead =
      one && leads_recovery(e.seq, racks, rack, job.config.workers_per_rack[rack], worker);
  if (!one || lead) {
    e.copied_to_all = true;
    send_kept_result(job, e, out, std::nullopt);
  } else {
    send_kept_result(job, e, out, std::pair{rack, worker});
  }
  return true;
}

// The entry of the packet's (tensor, seq), if this server keeps one; never creates one.
ParameterServer::Entry* ParameterServer::kept_entry(Job& job, const proto::Header& h) {
  const std::size_t first = std::size_t{h.seq & (job.ring - 1)} * 2;
  for (std::size_t i = first; i < first + 2; ++i) {
    Entry& e = job.entries[i];
    if (e.used && e.seq == h.seq && e.tensor == h.tensor) return &e;
  }
  return nullptr;
}

// Whether the packet's seq is older than what its ring slot keeps for its run: its state, and
// its result, are gone (entry_for creates no entry for it, answer_query finds none).
bool ParameterServer::behind_kept_state(const Job& job, const proto::Header& h) const {
  const std::size_t first = std::size_t{h.seq & (job.ring - 1)} * 2;
  for (std::size_t i = first; i < first + 2; ++i) {
    const Entry& e = job.entries[i];
    if (e.used && proto::run_of(e.tensor) == proto::run_of(h.tensor) &&
        seq_distance(h.seq, e.seq) < 0)
      return true;
  }
  return false;
}

// Whoever sends seq s has the result of s - ring (its ring slid past it): that result need
// not be kept for them any longer.
void ParameterServer::note_moved_on(Job& job, const proto::Header& h, const ContributorSet& who) {
  const std::uint32_t previous = h.seq - job.ring;
  const std::size_t first = std::size_t{h.seq & (job.ring - 1)} * 2;
  for (std::size_t i = first; i < first + 2; ++i) {
    Entry& e = job.entries[i];
    if (!e.used || !e.complete || e.seq != previous ||
        proto::run_of(e.tensor) != proto::run_of(h.tensor))
      continue;
    e.moved_on.add(who);
    if (e.moved_on.covers(job.full_masks)) {
      e.used = false;
      e.result.clear();
    }
  }
}

// Two entries per ring slot suffice: seq s + 2*ring can only be sent once every worker has the
// result of s + ring, which needs every worker's s + ring, sent after the result of s.
ParameterServer::Entry* ParameterServer::entry_for(Job& job, const proto::Header& h) {
  const std::size_t first = std::size_t{h.seq & (job.ring - 1)} * 2;
  Entry* pair[2] = {&job.entries[first], &job.entries[first + 1]};
  // State of another run of the job gives way: it is never summed with, nor answered from.
  for (Entry* e : pair) {
    if (!e->used || proto::run_of(e->tensor) == proto::run_of(h.tensor)) continue;
    e->used = false;
    e->result.clear();
  }
  for (Entry* e : pair)
    if (e->used && e->seq == h.seq) return e->tensor == h.tensor ? e : nullptr;
  if (behind_kept_state(job, h)) return nullptr;  // (only this run's entries are left)

  Entry* victim = nullptr;
  for (Entry* e : pair) {
    if (!e->used ||
        seq_distance(h.seq, e->seq) >= static_cast<std::int32_t>(2 * job.ring)) {
      victim = e;
      break;
    }
  }
  if (victim == nullptr) return nullptr;

  Entry& e = *victim;
  e.used = true;
  e.complete = e.float_mode = e.ecn = e.collided = false;
  e.tensor = h.tensor;
  e.seq = h.seq;
  e.aggregator = h.aggregator;
  e.value_count = h.value_count;
  e.owner_mark = owner_mark_of(h);
  e.parts = 0;
  e.held.clear();
  e.moved_on.clear();
  e.asked.clear();
  e.late_askers.clear();
  e.copied_to_all = false;
  e.sum.assign(h.value_count, 0);
  e.result.clear();
  return &e;
}

namespace {

ATP_VECTOR_CLONES
void add_wire_values(std::int64_t* sum, const std::uint8_t* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) sum[i] += proto::load_be_i32(values + 4 * i);
}

// Writes the sums as wire values if every one fits an int32; false (nothing to use) if not.
ATP_VECTOR_CLONES
bool sums_to_wire(const std::int64_t* sum, std::size_t n, std::uint8_t* out) {
  // sum - INT32_MIN is below 2^32 exactly when sum fits (sums of at most 1024 int32 values are
  // far from int64's limits): its high half gathers every misfit, without a branch.
  constexpr std::int64_t lo = std::numeric_limits<std::int32_t>::min();
  std::uint64_t misfits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    misfits |= static_cast<std::uint64_t>(sum[i] - lo) >> 32;
    proto::store_be32(out + 4 * i, static_cast<std::uint32_t>(sum[i]));
  }
  return misfits == 0;
}

}  // namespace

void ParameterServer::add_integers(Entry& e, const proto::Header& h,
                                   std::span<const std::uint8_t> packet) {
  add_wire_values(e.sum.data(), packet.data() + proto::kHeaderBytes, h.value_count);
}

void ParameterServer::enter_float_mode(Job& job, Entry& e, Outbox& out) {
  e.float_mode = true;
  e.held.clear();  // integer partial sums are useless now: every worker sends floats
  e.floats.assign(std::size_t{job.workers} * e.value_count, 0.0f);
  ++job.counters.float_fallbacks;
  send_float_request(job, e, out);
}

void ParameterServer::add_floats(Job& job, Entry& e, const proto::Header& h,
                                 std::span<const std::uint8_t> packet, Outbox& out) {
  // Floats are never aggregated on the way, so a float packet is one worker's values.
  if (h.racks_bitmap != 0 || std::popcount(h.workers_bitmap) != 1) {
    ++job.counters.rejected;
    return;
  }
  const unsigned worker = std::countr_zero(h.workers_bitmap);
  if (e.held.contains(h.rack, worker)) {
    ++job.counters.duplicates;
    return;
  }
  float* row = e.floats.data() + std::size_t{job.worker_offset[h.rack] + worker} * e.value_count;
  quant::floats_from_wire(packet.data() + proto::kHeaderBytes, e.value_count, row);
  e.held.add(ContributorSet::of(h, job.full_masks));
  if (e.held.covers(job.full_masks)) finish_floats(job, e, out);
}

void ParameterServer::finish_integers(Job& job, Entry& e, Outbox& out) {
  if (!sums_to_wire(e.sum.data(), e.value_count, result_payload(e))) {
    e.result.clear();
    enter_float_mode(job, e, out);
    return;
  }
  if (e.parts == 1) ++job.counters.completed_in_network;
  send_result(job, e, false, out);
}

// Summed in double, worker by worker in rack-major order, whatever order packets came in:
// the float result is deterministic.
void ParameterServer::finish_floats(Job& job, Entry& e, Outbox& out) {
  std::vector<float> sum(e.value_count);
  for (std::size_t i = 0; i < e.value_count; ++i) {
    double acc = 0;
    for (std::uint32_t w = 0; w < job.workers; ++w) acc += e.floats[std::size_t{w} * e.value_count + i];
    sum[i] = static_cast<float>(acc);
  }
  quant::floats_to_wire(sum.data(), sum.size(), result_payload(e));
  send_result(job, e, true, out);
}

proto::Header ParameterServer::downward_header(const Job& job, const Entry& e) const {
  return downward_header(job, e.tensor, e.seq, e.aggregator);
}

proto::Header ParameterServer::downward_header(const Job& job, std::uint32_t tensor,
                                               std::uint32_t seq, std::uint32_t aggregator) const {
  proto::Header h;
  h.next_level = proto::Level::parameter_server;
  h.ps_index = job.config.ps_index;
  h.job = job.config.job;
  h.token = job.config.token;
  h.tensor = tensor;
  h.seq = seq;
  h.aggregator = aggregator;
  h.job_fan_in = static_cast<std::uint8_t>(job.config.workers_per_rack.size());
  h.rack_fan_in = job.config.workers_per_rack[0];
  return h;
}

// The stored result bytes again, for a late resend or a query: the result was lost on its way
// down to someone. Addressed to one worker (rack, bit), or to every worker.
void ParameterServer::send_kept_result(Job& job, Entry& e, Outbox& out,
                                       std::optional<std::pair<unsigned, unsigned>> to) {
  proto::store_be16(e.result.data() + proto::offset::results_behind, results_behind(job, e));
  send_copies(job, e, out, to);
}

// A reduce-scatter shard's values go to its owner alone: every other worker gets the header,
// which its window and loss recovery need, and its downlink carries 44 bytes for the seq
// instead of K values (docs/protocol.md §8.1). The done copy goes first: a switch frees the
// aggregator on either, and the owner, which waits for its values, ignores it.
void ParameterServer::send_copies(Job& job, Entry& e, Outbox& out,
                                  std::optional<std::pair<unsigned, unsigned>> to) {
  const auto owner = proto::decode_result_owner(e.owner_mark);
  if (!owner) return send_copy(job, e, out, to, true);
  const std::pair<unsigned, unsigned> keeper{owner->rack, owner->rank_in_rack};
  if (!to || *to != keeper) {
    send_copy(job, e, out, to, false);
    ++job.counters.done_copies;
  }
  if (!to || *to == keeper) send_copy(job, e, out, keeper, true);
}

void ParameterServer::send_copy(const Job& job, const Entry& e, Outbox& out,
                                std::optional<std::pair<unsigned, unsigned>> to, bool values) {
  const std::size_t bytes = values ? e.result.size() : proto::kHeaderBytes;
  auto copy = out.add(job.config.downstream, bytes);
  std::copy_n(e.result.begin(), bytes, copy.begin());
  if (!values) proto::store_be16(copy.data() + proto::offset::value_count, 0);
  if (!to) return;
  const auto [rack, bit] = *to;
  copy[proto::offset::rack] = static_cast<std::uint8_t>(rack);
  copy[proto::offset::rack_fan_in] = job.config.workers_per_rack[rack];
  proto::store_be32(copy.data() + proto::offset::workers_bitmap, 1u << bit);
}

// Which of this shard's kResultsBehind (16) seqs before e's have had their result sent: a
// worker that finds one of them missing when e's result arrives knows it was lost on the way
// down, and asks for it instead of resending values the sum holds (engines.md §3.6). Only the
// same run's entries count: another run's seq of the same number says nothing about this one.
std::uint16_t ParameterServer::results_behind(const Job& job, const Entry& e) const {
  std::uint16_t bits = 0;
  const std::uint32_t step = job.config.parameter_servers;
  for (std::uint32_t i = 0; i < proto::kResultsBehind; ++i) {
    const std::uint32_t seq = e.seq - (i + 1) * step;
    const std::size_t first = std::size_t{seq & (job.ring - 1)} * 2;
    for (std::size_t k = first; k < first + 2; ++k) {
      const Entry& behind = job.entries[k];
      if (behind.used && behind.complete && behind.seq == seq &&
          proto::run_of(behind.tensor) == proto::run_of(e.tensor))
        bits |= static_cast<std::uint16_t>(1u << i);
    }
  }
  return bits;
}

// The result is kept (a late resend gets it again): its values are written there once, and
// send_result() adds the header and queues a copy.
std::uint8_t* ParameterServer::result_payload(Entry& e) {
  e.result.resize(proto::kHeaderBytes + std::size_t{e.value_count} * proto::kValueBytes);
  return e.result.data() + proto::kHeaderBytes;
}

void ParameterServer::send_result(Job& job, Entry& e, bool floats, Outbox& out) {
  proto::Header h = downward_header(job, e);
  h.set(flag::kResult);
  h.set(flag::kFloatPayload, floats);
  h.set(flag::kEcn, e.ecn);
  // The seq met a busy aggregator on the way: the workers' aggregator windows shrink.
  h.set(flag::kCollision, e.collided);
  h.value_count = e.value_count;
  h.results_behind = results_behind(job, e);

  if (job.planner.enabled()) {
    h.set(flag::kRemap);
    const PlannedResult planned = job.planner.on_result(now_, e.seq, e.aggregator, e.collided);
    h.remap_index = proto::encode_lane_assignment(planned.next);
    ++job.counters.plans;
    job.counters.borrowed += planned.was_borrowed;
    job.counters.borrowed_collided += planned.was_borrowed && e.collided;
    job.counters.home_collided += !planned.was_borrowed && e.collided;
  }

  proto::encode(h, e.result);  // result_payload() sized it
  send_copies(job, e, out, std::nullopt);
  e.complete = true;
  std::vector<float>().swap(e.floats);  // float mode is rare: give the memory back
  ++job.counters.completed;
}

// A resend reached the PS and the seq is still short. The resend flushed what the switches on
// its path held, so a contribution missing now may be lost: ask exactly its workers, once each,
// rather than wait for every worker of the job to resend (engines.md §3.6). A rack the PS has
// nothing of may still hold a partial sum in its switch: one of its workers (the seq's lead
// rank) is asked, and its resend flushes that sum. A lost request is the workers' timers'
// business, as a lost resend is.
void ParameterServer::request_missing(Job& job, Entry& e, Outbox& out) {
  const auto racks = static_cast<std::uint32_t>(job.full_masks.size());
  for (std::uint32_t r = 0; r < racks; ++r) {
    const std::uint32_t held = e.held.workers_of(r);
    const std::uint32_t lead = 1u << lead_rank(e.seq, racks, job.config.workers_per_rack[r]);
    const std::uint32_t wanted = held == 0 ? lead : job.full_masks[r] & ~held;
    const std::uint32_t names = wanted & ~e.asked.workers_of(r);
    if (names == 0) continue;
    const auto rack = static_cast<std::uint8_t>(r);
    send_resend_request(job, e.tensor, e.seq, e.aggregator, rack, names, out);
    e.asked.add(rack, names);
  }
}

// A float request naming `names` of rack `rack`: only they resend (protocol.md §4).
void ParameterServer::send_resend_request(Job& job, std::uint32_t tensor, std::uint32_t seq,
                                         std::uint32_t aggregator, std::uint8_t rack,
                                         std::uint32_t names, Outbox& out) {
  proto::Header h = downward_header(job, tensor, seq, aggregator);
  h.set(flag::kFloatRequest);
  h.rack = rack;
  h.rack_fan_in = job.config.workers_per_rack[rack];
  h.workers_bitmap = names;
  proto::encode(h, out.add(job.config.downstream, h.packet_bytes()));
  ++job.counters.resend_requests;
}

void ParameterServer::send_float_request(Job& job, const Entry& e, Outbox& out) {
  proto::Header h = downward_header(job, e);
  h.set(flag::kFloatRequest);
  h.value_count = 0;
  proto::encode(h, out.add(job.config.downstream, h.packet_bytes()));
  ++job.counters.float_requests;
}

}  // namespace atp::engines
