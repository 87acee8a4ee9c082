#include "engines/worker/worker.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "proto/aggregator_index.h"
#include "proto/header.h"
#include "quant/quantizer.h"

namespace atp::engines {

namespace flag = proto::flag;

void validate(const WorkerConfig& c) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("worker config: " + what); };
  if (c.rack_fan_in == 0 || c.rack_fan_in > proto::kMaxFanIn) bad("rack_fan_in must be 1..32");
  if (c.job_fan_in == 0 || c.job_fan_in > proto::kMaxFanIn) bad("job_fan_in must be 1..32");
  if (c.rank_in_rack >= c.rack_fan_in) bad("rank_in_rack must be below rack_fan_in");
  if (c.rack >= c.job_fan_in) bad("rack must be below job_fan_in");
  if (c.job_workers < c.rack_fan_in || c.job_workers > proto::kMaxFanIn * proto::kMaxFanIn)
    bad("job_workers must be at least rack_fan_in and at most 1024");
  if (c.values_per_packet == 0 || c.values_per_packet > proto::kMaxValues)
    bad("values_per_packet must be 1.." + std::to_string(proto::kMaxValues));
  if (c.window == 0 || !std::has_single_bit(c.window) || c.window > kMaxRing)
    bad("window must be a power of two up to 2^20");
  if (!valid_ring(c.window, c.ring))
    bad("ring must be a power of two from window up to 2^20 (or 0)");
  if (!(c.scale > 0) || !std::isfinite(c.scale)) bad("scale must be a positive finite number");
  if (c.parameter_servers == 0) bad("parameter_servers must be at least 1");
  if (c.min_rto <= 0 || c.max_rto < c.min_rto) bad("need 0 < min_rto <= max_rto");
  if (c.initial_rto <= 0) bad("initial_rto must be positive");
  if (c.deadline <= 0) bad("deadline must be positive");
  if ((!c.run || c.claim_run) && c.join_nonce == 0)
    bad("join_nonce must be a random, non-zero number when the run is not given or claimed");
  if (c.claim_run && !c.run) bad("claim_run needs the run to claim");
}

bool parse_placement(const std::string& text, Placement& out) {
  if (text == "planned") out = Placement::planned;
  else if (text == "hash") out = Placement::hash;
  else if (text == "linear") out = Placement::linear;
  else return false;
  return true;
}

std::string to_string(Placement p) {
  switch (p) {
    case Placement::planned: return "planned";
    case Placement::hash: return "hash";
    case Placement::linear: return "linear";
  }
  return "unknown";
}

namespace {
std::uint32_t starting_window(const WorkerConfig& c) {
  return c.initial_window ? c.initial_window : c.window;
}

// Fragments are sent and their results written in tensor order, so the bytes this far ahead
// are needed next. Asking for them now overlaps the memory's latency with this fragment's
// work: for tensors beyond the caches it doubles the worker's throughput (docs/performance.md).
// Writes are prefetched too, since a store to a line not in cache stalls on reading it first.
// A prefetch never faults, so running past the end of a tensor is harmless (the address is
// computed as an integer: a pointer past the end of the tensor would be undefined).
constexpr std::size_t kPrefetchAhead = 8192;
constexpr std::size_t kCacheLine = 64;

// Four lines per step: a K = 64 fragment is four lines, and a loop of one line per step
// cost as many instructions in loop control as in prefetches. Always inlined, with the
// builtin written out in it: GCC deems a prefetch free of side effects, so a call to a helper
// that only prefetches may be deleted as dead code (it did, to a lambda here, once on_result
// was inlined into its caller: 20-25 % slower, docs/performance.md).
template <bool kForWrite>
[[gnu::always_inline]] inline void prefetch_ahead(const void* at, std::size_t bytes) {
  constexpr int kWrite = kForWrite ? 1 : 0;
  std::uintptr_t line = reinterpret_cast<std::uintptr_t>(at) + kPrefetchAhead;
  const std::uintptr_t end = line + bytes;
  for (; line + 4 * kCacheLine <= end; line += 4 * kCacheLine) {
    __builtin_prefetch(reinterpret_cast<const void*>(line), kWrite, 0);
    __builtin_prefetch(reinterpret_cast<const void*>(line + kCacheLine), kWrite, 0);
    __builtin_prefetch(reinterpret_cast<const void*>(line + 2 * kCacheLine), kWrite, 0);
    __builtin_prefetch(reinterpret_cast<const void*>(line + 3 * kCacheLine), kWrite, 0);
  }
  for (; line < end; line += kCacheLine)
    __builtin_prefetch(reinterpret_cast<const void*>(line), kWrite, 0);
}

// What every packet this worker sends carries alike (its fragments and its join requests);
// each adds the rest.
proto::Header own_fields(const WorkerConfig& c) {
  proto::Header h;
  h.next_level = proto::Level::rack;
  h.job = c.job;
  h.token = c.token;
  h.workers_bitmap = 1u << c.rank_in_rack;
  h.rack_fan_in = c.rack_fan_in;
  h.job_fan_in = c.job_fan_in;
  h.rack = c.rack;
  return h;
}
}  // namespace

Worker::Worker(WorkerConfig config)
    : config_((validate(config), config)),
      run_(config.claim_run ? std::nullopt : config.run),
      cwnd_(starting_window(config), config.window, config.congestion_control),
      aggregator_window_(starting_window(config), config.window),
      rtt_(config.initial_rto, config.min_rto, config.max_rto),
      quant_limit_(quant::sum_safe_magnitude(config.job_workers)),
      fragment_header_(own_fields(config)),
      ring_(ring_or_default(config.window, config.ring)),
      ring_mask_(static_cast<std::uint32_t>(ring_.size() - 1)),
      // Hashed and linear lanes are seq mod window, as the paper's: a job touches at most
      // `window` aggregators.
      plan_lag_(config.placement == Placement::planned
                    ? plan_lag(config.window, ring_or_default(config.window, config.ring))
                    : config.window),
      home_(config.home),
      home_turns_(config.placement == Placement::planned &&
                  home_.initial(0, config.window).has_value()),
      lanes_(plan_lag_),
      holding_(std::max(1u, config.home.shards), 0) {
  plan_first_lanes();
}

void Worker::plan_first_lanes() {
  for (std::uint32_t lane = 0; lane < lanes_.size(); ++lane) {
    LaneAssignment& l = lanes_[lane];
    l.seq = lane;
    if (const auto turn = home_turns_ ? home_.initial(lane, config_.window) : std::nullopt) {
      l.aggregator = turn->aggregator;
      l.in_flight_cap = turn->in_flight_cap;
    } else {
      const bool linear = config_.placement == Placement::linear;
      l.aggregator = linear ? lane : proto::aggregator_hash(config_.job, lane);
    }
  }
}

void Worker::set_home(const HomeSlice& home) {
  if (!home_turns_ || home.initial(0, config_.window) == std::nullopt) return;
  home_.first = home.first;
  home_.count = home.count;
  // Every worker of a job hears of a new home at once, before or after its first send; those
  // that have sent nothing yet agree on the first lanes again.
  if (next_seq_ == 0) plan_first_lanes();
}

std::uint32_t Worker::submit(Time now, std::span<const float> input, std::span<float> output,
                             Outbox& out) {
  if (input.size() != output.size())
    throw std::invalid_argument("allreduce: input and output sizes differ");
  return submit(now, quant::Precision::float32, input.data(), output.data(), input.size(), out);
}

std::uint32_t Worker::submit(Time now, quant::Precision precision, const void* input,
                             void* output, std::size_t count, Outbox& out,
                             std::optional<proto::ResultOwner> owner) {
  if (failed()) throw std::runtime_error(error_);
  if (owner && (owner->rack >= config_.job_fan_in || owner->rank_in_rack >= proto::kMaxFanIn))
    throw std::invalid_argument("reduce-scatter: the shard's owner is not a worker of the job");
  const std::size_t k = config_.values_per_packet;
  const std::size_t fragments = (count + k - 1) / k;
  if (fragments > (std::size_t{1} << 30))
    throw std::invalid_argument("allreduce: tensor too large (more than 2^30 fragments)");

  const std::uint32_t id = next_tensor_id_++;
  if (fragments == 0) {
    completed_.push_back(id);  // nothing to sum: an empty tensor is its own result
    return id;
  }
  tensors_.push_back(Tensor{id, static_cast<const std::uint8_t*>(input),
                            static_cast<std::uint8_t*>(output), count, end_seq_,
                            static_cast<std::uint32_t>(fragments), 0, precision,
                            static_cast<std::uint32_t>(quant::bytes_per_value(precision)),
                            owner ? proto::encode_result_owner(*owner) : 0,
                            !owner || *owner == proto::ResultOwner{config_.rack,
                                                                   config_.rank_in_rack}});
  end_seq_ += static_cast<std::uint32_t>(fragments);
  if (!run_ && !join_started_) {
    join_started_ = now;
    send_join(now, out);
  }
  send_new(now, out);
  return id;
}

// Asks PS 0 for this launch's run; repeated every min_rto until it answers. Not backed
// off: no worker of the job gets its first result before the job's last join is answered, and
// under loss one of a job's joins is often lost twice or three times (a join and its answer
// cross about eight links on two racks). With a doubling interval those losses cost 0.8 + 1.6
// + 3.2 ms in the simulator, several lossless iterations, and the staggered start left the
// early workers' round trips measured long (they waited for the late one), which slowed their
// loss recovery for the rest of the iteration. Two racks, two jobs, K = 64, eight seeds: the
// slower job's completion time was 0.32 of lossless at 5 % loss with the doubling, 0.42
// without; at 10 % 0.03 (one job stuck for seconds), now 0.22. The interval is the timer's
// floor, not the initial RTO: PS 0 answers after every rank asked twice, so the interval is
// every launch's wait, and a lost answer stalls the job's other workers for another one
// (one of two jobs starting 0.8 ms late in the simulator let the other run alone, faster
// than without loss). A join is one header-only packet per min_rto (50 ms in the daemons),
// and PS 0 forgets joins not repeated within kJoinRepeatAtMost.
void Worker::send_join(Time now, Outbox& out) {
  proto::Header h = own_fields(config_);
  h.kind = proto::Kind::join;
  h.ps_index = 0;
  h.seq = config_.join_nonce;
  if (config_.claim_run) h.remap_index = proto::kRunClaim | *config_.run;
  proto::encode(h, out.add(config_.uplink, h.packet_bytes()));
  join_resend_at_ = now + std::min({config_.min_rto, config_.max_rto, kJoinRepeatAtMost});
}

void Worker::on_joined(Time now, const proto::Header& h, Outbox& out) {
  const std::uint16_t run = proto::run_of(h.tensor);
  if (config_.claim_run && ((h.remap_index & proto::kRunRefused) != 0 || run != *config_.run))
    return fail("job " + std::to_string(config_.job) + " worker " + std::to_string(config_.rack) +
                "/" + std::to_string(config_.rank_in_rack) + ": run " + std::to_string(*config_.run) +
                " was used by another launch of this job on these daemons, and the job's first "
                "parameter server refused it (its results could be that launch's): give each "
                "launch its own run id, or none (the server then hands out a fresh one); to use "
                "it again, remove and admit the job again (atp ctl) or restart its servers");
  run_ = run;
  join_started_.reset();
  send_new(now, out);
}

void Worker::update_aggregator_window(bool collided) {
  aggregator_window_.on_result(collided);
  aggregator_window_.cap(cwnd_.value());
}

// As many first transmissions as the windows and the ring allow, counted once: nothing in the
// loop changes the windows.
void Worker::send_new(Time now, Outbox& out) { fill_window(now, out); }

// send_new's body, inlined into on_result (where it runs per result) and send_new only.
[[gnu::always_inline]] inline void Worker::fill_window(Time now, Outbox& out) {
  if (failed() || !run_) return;
  const std::uint32_t allowed = allowed_in_flight();
  const std::uint32_t ring_room = ring_mask_ + 1 - (next_seq_ - base_);
  // Gaps out of the pipe (left to their seq's lead, or their result asked for) are not on the
  // wire. While the window is at its ceiling, up to half a window of them leave room for new
  // fragments (RFC 6675's pipe): a hole held for the lead's recovery stalls a job that the
  // window, not a link, bounds (two racks, K = 64, 5 % loss, eight seeds: 0.55 of lossless
  // with half, 0.45 with a quarter). More let a job that its links bound queue its own
  // recovery (one rack, K = 256: 0.78 of lossless at 2 % and 0.17 at 10 % with half, 0.80 and
  // 0.20 with a quarter; all deferred gaps out of the pipe once gave 0.20 at 5 % on two
  // racks). Below the ceiling the congestion window has cut for queues, and none do (on real
  // hosts at 1 % loss, two runs of five fell to a third of the bandwidth when they always did).
  const std::uint32_t out_of_pipe =
      cwnd_.allowed() >= config_.window ? std::min(deferred_, config_.window / 2) : 0;
  const std::uint32_t pipe = in_flight_ - out_of_pipe;
  std::uint32_t budget = std::min({end_seq_ - next_seq_, ring_room,
                                   allowed > pipe ? allowed - pipe : 0u});
  if (budget == 0) return;
  Tensor* t = sending_ ? sending_ : &tensors_[send_cursor_];
  for (; budget > 0; --budget) {
    // The plan may hold this seq until fewer are in flight: its aggregator is then free of
    // the job's own earlier seqs.
    const std::uint32_t cap = assignment(next_seq_).in_flight_cap;
    if (cap != 0 && collided_share_ < kCapsYieldAt && holding_aggregators(next_seq_) >= cap)
      break;
    while (next_seq_ - t->first_seq >= t->fragments) t = &tensors_[++send_cursor_];
    Fragment& f = slot(next_seq_);
    f = Fragment{};
    f.active = true;
    f.seq = next_seq_;
    f.tensor = t;
    f.offset = std::size_t{next_seq_ - t->first_seq} * config_.values_per_packet;
    f.count = static_cast<std::uint16_t>(
        std::min<std::size_t>(config_.values_per_packet, t->size - f.offset));
    f.first_sent = now;
    write_fragment(now, f, false, out);
    ++stats_.fragments_sent;
    ++in_flight_;
    f.holding = true;
    ++holding_[plan_shard_of(f.seq)];
    ++next_seq_;
  }
  sending_ = t;
}

// transmit's body is inlined into fill_window (first sends) and here (resends, float switches).
void Worker::transmit(Time now, Fragment& f, bool resend, Outbox& out) {
  write_fragment(now, f, resend, out);
}

[[gnu::always_inline]] inline void Worker::write_fragment(Time now, Fragment& f, bool resend,
                                                          Outbox& out) {
  std::span<std::uint8_t> packet =
      out.add(config_.uplink, proto::kHeaderBytes + proto::kValueBytes * f.count);
  std::uint8_t* values = packet.data() + proto::kHeaderBytes;
  const Tensor& t = *f.tensor;
  const std::uint8_t* in = t.input + std::size_t{t.value_bytes} * f.offset;
  if (!resend) prefetch_ahead<false>(in, t.value_bytes * f.count);  // the next to go
  // Values whose sum over the job's workers could leave int32 (or that are not finite) switch
  // this fragment to floats for good. The bound makes overflow a property of the inputs, never
  // of the order switches add them in, so every path gives the same result.
  if (!f.float_mode &&
      !quant::quantize_to_wire(t.precision, in, f.count, config_.scale, quant_limit_, values))
    f.float_mode = true;
  std::uint8_t flags = resend ? flag::kResend : 0;
  if (f.float_mode) {
    quant::floats_to_wire(t.precision, in, f.count, values);
    flags |= flag::kFloatPayload;
    ++stats_.float_fragments;
  }
  fragment_header_.write(flags, static_cast<std::uint8_t>(shard_of(f.seq)),
                         proto::wire_tensor(*run_, f.tensor->id), f.seq,
                         assignment(f.seq).aggregator,
                         f.count, packet.data());
  if (t.owner_mark != 0) proto::store_be32(packet.data() + proto::offset::remap_index, t.owner_mark);
  f.last_sent = now;
  // Each fragment backs off its own timer: random loss is not a wrong round-trip estimate.
  f.rto_deadline = now + std::min(config_.max_rto, rtt_.rto() << std::min(f.timeouts, 6u));
  const Time due = std::min(f.rto_deadline, f.first_sent + config_.deadline);
  note_timer(due);
}

void Worker::on_packets(Time now, std::span<const Arrival> arrivals, Outbox& out) {
  batch_ = {};
  for (const Arrival& arrival : arrivals) on_datagram(now, arrival, out);
  if (batch_.any_result) finish_batch(now);
}

// One datagram: checked, then a result is taken; a handshake answer or a float request is
// acted on at once, anything else counted.
[[gnu::always_inline]] inline void Worker::on_datagram(Time now, const Arrival& arrival,
                                                      Outbox& out) {
  proto::Header h;
  if (proto::decode(arrival.packet, h) != proto::DecodeError::ok || !h.is_downward() ||
      h.job != config_.job) {
    ++stats_.malformed;
    return;
  }
  if (h.token != config_.token || (arrival.from && *arrival.from != config_.uplink)) {
    ++stats_.forged;
    return;
  }
  if (failed()) return;
  if (h.kind == proto::Kind::joined) {  // another launch's answer is not ours
    if (answers_our_join(h)) on_joined(now, h, out);
    return;
  }
  // Active slots hold exactly the seqs from base_ to next_seq_, so a result outside the window
  // fails the slot's checks.
  Fragment& f = slot(h.seq);
  if (!f.active || f.seq != h.seq || f.acked ||
      proto::wire_tensor(*run_, f.tensor->id) != h.tensor) {
    ++stats_.duplicate_results;
    return;
  }

  if (h.is_resend_request()) return resend_on_request(now, h, f, out);
  if (h.has(flag::kFloatRequest)) {
    // The PS met an overflow for this seq and sums floats instead. Already sending floats:
    // a lost float fragment is the retransmission timer's business.
    if (!f.float_mode) {
      f.float_mode = true;
      f.rtt_ambiguous = true;
      transmit(now, f, false, out);
    }
    return;
  }
  if (h.value_count == 0 && h.has(flag::kResult) && f.tensor->owner_mark != 0) {
    // A done copy: the seq is summed, its values gone to the shard's owner. The owner waits
    // for the values themselves, which follow it; if a gap shows them lost, it asks the PS at
    // once (scan_for_gaps): nobody else misses them.
    if (f.tensor->keeps_values) {
      f.result_sent = true;
      return;
    }
    ++stats_.done_copies;
    return on_result(now, {h.flags, h.remap_index, h.results_behind}, nullptr, f, out);
  }
  if (h.value_count != f.count || h.has(flag::kWrapped)) {
    ++stats_.malformed;
    return;
  }
  on_result(now, {h.flags, h.remap_index, h.results_behind},
            arrival.packet.data() + proto::kHeaderBytes, f, out);
}

// A checked result for fragment `f`: its values written into the output tensor, the fragment
// acknowledged, and the window it frees filled. Inlined into on_datagram, its one caller (29
// instructions per K = 64 fragment).
[[gnu::always_inline]] inline void Worker::on_result(Time now, ResultFields h,
                                                    const std::uint8_t* values, Fragment& f,
                                                    Outbox& out) {
  const Tensor& t = *f.tensor;
  if (t.keeps_values) {  // not another worker's shard of a reduce-scatter
    std::uint8_t* dst = t.output + std::size_t{t.value_bytes} * f.offset;
    prefetch_ahead<true>(dst, t.value_bytes * f.count);
    if (h.has(flag::kFloatPayload))
      quant::floats_from_wire(t.precision, values, f.count, dst);
    else
      quant::dequantize_from_wire(t.precision, values, f.count, config_.scale, dst);
  }

  f.acked = true;
  --in_flight_;
  if (f.deferred) --deferred_;
  release(f);
  ++stats_.results;
  if (samples_from_ == kNever) samples_from_ = now;
  if (++f.tensor->finished == f.tensor->fragments) completed_.push_back(f.tensor->id);
  batch_.any_result = true;
  if (!f.rtt_ambiguous) {
    std::optional<Time>& newest =
        f.first_sent >= samples_from_ ? batch_.newest_sent : batch_.newest_launch_sent;
    if (!newest || f.first_sent > *newest) newest = f.first_sent;
  }
  if (h.has(flag::kEcn)) ++stats_.ecn_marks;
  update_windows(h, f.seq);
  if (h.has(flag::kRemap) && config_.placement == Placement::planned)
    take_plan(f.seq, h.remap_index);
  detect_gaps(now, f, h.results_behind, out);
  advance_base();
  // Into the slot this result freed, now rather than after the batch: the fragment's input
  // lines and packet buffers are then still in cache (one send_new per batch measured 10-15 %
  // slower for tensors beyond the caches, docs/performance.md).
  fill_window(now, out);
}

// Waits set before the first sample took the initial RTO (800 us in the simulator, 100 ms in
// the daemons), and those set before the first path sample the launch's round trips: at each
// of the two, a deferred gap waits one recovery wait from now at most and a resend's check two
// (arm_recheck). Without this a gap found in the launch window held its seq that long, the
// ring filled behind it, and the job stalled until every worker's timer fired (two racks, 1 %
// loss).
void Worker::shorten_first_waits(Time now) {
  for (std::uint32_t u = base_; u != next_seq_; ++u) {
    Fragment& f = slot(u);
    if (!f.active || f.acked || !(f.deferred || f.recheck)) continue;
    const Time wait_ends = now + (f.deferred ? lead_wait() : recheck_wait());
    if (f.fallback_at > wait_ends) {
      f.fallback_at = wait_ends;
      note_timer(wait_ends);
    }
  }
}

// The PS's plan for the seq plan_lag_ after `seq`, which uses the same lane.
void Worker::take_plan(std::uint32_t seq, std::uint32_t remap_index) {
  const proto::LaneAssignment plan = proto::decode_lane_assignment(remap_index);
  const std::uint32_t next = seq + plan_lag_;
  LaneAssignment& lane = lanes_[next & (plan_lag_ - 1)];
  if (lane.aggregator != plan.aggregator) ++stats_.remaps;
  lane = {next, plan.aggregator, plan.in_flight_cap};
}

void Worker::finish_batch(Time now) {
  take_rtt_sample(now);
  retire_finished_tensors();
  arm_probe(now);
}

// The launch window (sent before the first result) waited for the job's last worker: to join
// (a lost join answer: a whole join interval), or to start at all. Its answers time the
// launch, not the path, so they count only until a fragment sent after the first result is
// answered, and that first path sample replaces them rather than being averaged in. Averaged,
// they made srtt 0.8 ms where the path's is 12 us, for many round trips, and every recovery
// wait taken from it as long (two racks at 1 % loss: one worker's gap waited 1.6 ms, its ring
// filled, and the job stalled until every worker's timer fired). Until then they are all there
// is: a first allreduce that fits in the launch window has no other sample.
void Worker::take_rtt_sample(Time now) {
  const bool path = batch_.newest_sent.has_value();
  if (!path && (!batch_.newest_launch_sent || path_sampled_)) return;
  const bool first_path_sample = path && !path_sampled_;
  const bool first_sample = !rtt_.has_sample() || first_path_sample;
  if (first_path_sample) rtt_.restart();
  rtt_.sample(now - (path ? *batch_.newest_sent : *batch_.newest_launch_sent));
  path_sampled_ |= path;
  if (first_sample) shorten_first_waits(now);
}

// Results normally come back in about the order fragments left. A result for fragment `acked`
// says g (still unanswered) is lost if
//   - `threshold` later fragments overtook g's first transmission (duplicate-ACK style), or
//   - g's latest transmission left a quarter round trip or more before `acked` did (RACK's
//     time rule): answers are not that far out of order, and this also catches a lost resend
//     long before its timer would. Comparing send times, not ages, keeps a stall that delayed
//     every fragment alike (a slow worker of the job) from looking like loss. g must also be
//     that much older than its answer could be (answer_due): a resend's answer needs no wait
//     for the job's slowest worker and overtakes fragments sent before it that are not lost
//     (without this check, 11 resends per lost packet at 0.1 % loss on two racks).
// Only fragments of the same PS shard count: each shard's results take their own path and
// queue, so one shard's answers overtaking another's say nothing about loss (as each subflow
// of a multipath transport keeps its own sequence space).
void Worker::scan_for_gaps(Time now, const Fragment& acked, std::uint16_t results_behind,
                           Outbox& out) {
  // A later fragment left no earlier than `acked` unless `acked` was sent more than once, so
  // only then can one qualify; otherwise the scan stops at `acked`.
  const std::uint32_t end = acked.rtt_ambiguous ? next_seq_ : acked.seq;
  if (config_.reorder_threshold == 0) return;
  const auto threshold =
      static_cast<std::int32_t>(config_.reorder_threshold * config_.parameter_servers);
  const Duration reorder_window =
      rtt_.has_sample() ? std::max<Duration>({rtt_.srtt() / 4, 2 * rtt_.rttvar(), 1})
                        : std::numeric_limits<Duration>::max();
  // A resend's answer waits for no other worker (the others' contributions are in), so it
  // comes back sooner than a first transmission's: a fresh fragment is timed against it only
  // once older than fresh answers take (srtt), not than the quickest one did (min_rtt).
  const bool quick_answer = acked.retransmits > 0;
  for (std::uint32_t u = base_; u != end; ++u) {
    Fragment& g = slot(u);
    if (!g.active || g.acked || g.last_sent > acked.last_sent) continue;
    if (shard_of(u) != shard_of(acked.seq)) continue;
    const bool overtaken = g.retransmits == 0 && seq_distance(acked.seq, u) >= threshold;
    const Duration due = quick_answer && g.retransmits == 0 ? rtt_.srtt() : answer_due(g);
    if (!overtaken && (acked.last_sent - g.last_sent < reorder_window ||
                       now - g.last_sent < due + reorder_window))
      continue;
    // The PS had sent g's result when it sent acked's: lost on its way down (results_behind).
    const bool finished = result_sent_before(acked.seq, results_behind, u);
    if (g.deferred) {  // the lead's recovery, the query, or the fallback sees to it
      g.result_sent |= finished;
      continue;
    }
    if (g.retransmits == 0 && !leads_recovery(u) && !g.result_sent) {
      // Left to the lead even so: if the result was lost on a link it shares, the lead's query
      // brings it to all, where each worker asking at once had the PS multicast it once per
      // asker (a rack of 16: 0.93 of the steady rate it had before, against 1.03 this way).
      defer_to_lead(now, g);
      g.result_sent = finished;
      continue;
    }
    if (finished || g.result_sent) {  // result_sent here: its shard's done copy came
      ask_for_result(now, g, out);
      continue;
    }
    resend(now, g, stats_.fast_resends, out);
    arm_recheck(now, g);
  }
}

// Another worker leads this seq's recovery: its resend flushes the switches, and the PS then
// asks by name for whatever it still lacks (this worker's contribution, if it was the one
// lost). One lost packet so costs one or two resends instead of one per worker. This worker
// resends on its own only if neither a result nor a request came within lead_wait() (two
// smoothed round trips: the lead's resend up, the request or result down); a request naming
// others extends the wait. Results lost on their way down to a few workers (the lead among
// those served) are found that way, two round trips later.
void Worker::defer_to_lead(Time now, Fragment& g) {
  hold_out_of_pipe(g);
  g.fallback_at = now + lead_wait();
  ++stats_.deferred_gaps;
  note_timer(g.fallback_at);
}

// A gap waiting for someone else's packet (the lead's resend, the PS's answer) is not on the
// wire: it leaves the pipe until it is resent (fill_window).
void Worker::hold_out_of_pipe(Fragment& g) {
  g.deferred = true;
  // Its answer will time the recovery, not the path: no round-trip sample from it (as from a
  // resent fragment). Sampled, it fed the wait back into srtt, and the wait, two srtt, grew
  // without bound (the contended lossy scenario of cluster_test).
  g.rtt_ambiguous = true;
  ++deferred_;
  release(g);  // a resend flushes the seq from the switches, for every worker alike
}

// A later result says the PS had sent g's result already: it was lost on its way down to this
// worker (and maybe others), and this worker's values are in the sum. A resend (the lead's
// first move, or any worker's after its own resend) would only bring the kept result back at
// the cost of K values up; the header alone does. Without an answer within lead_wait() (the
// query or its answer was lost too) it is asked again, not resent: the seq is finished. The
// retransmission timer, which resends values, stays the last resort.
void Worker::ask_for_result(Time now, Fragment& g, Outbox& out) {
  hold_out_of_pipe(g);
  g.result_sent = true;
  ++stats_.lost_down_queries;
  send_query(now, g, out);
}

// The lead's recovery did not show within lead_wait(): the result was lost on its way down to
// this worker, or the lead's resend or the PS's request was lost. Only the first needs no
// values, and it is the likelier (every result crosses more links to reach this worker than
// the lead's recovery does): the PS is asked, with the header alone, and sends the result
// again if it has it, or asks by name for what it lacks (this worker's values included, if
// they are what was lost). Resent with values only if nothing came within another wait.
void Worker::send_query(Time now, Fragment& f, Outbox& out) {
  proto::Header h = own_fields(config_);
  h.kind = proto::Kind::query;
  h.next_level = proto::Level::parameter_server;  // switches pass it up untouched
  h.ps_index = static_cast<std::uint8_t>(shard_of(f.seq));
  h.tensor = proto::wire_tensor(*run_, f.tensor->id);
  h.seq = f.seq;
  h.aggregator = assignment(f.seq).aggregator;
  proto::encode(h, out.add(config_.uplink, h.packet_bytes()));
  f.queried = true;
  f.fallback_at = now + lead_wait();
  ++stats_.result_queries;
  note_timer(f.fallback_at);
}

// The PS lacks this worker's contribution after a resend flushed the switches (or lacks its
// whole rack's, and this worker leads the seq there): resend it now, as it was sent.
void Worker::resend_on_request(Time now, const proto::Header& h, Fragment& f, Outbox& out) {
  if (h.rack != config_.rack || ((h.workers_bitmap >> config_.rank_in_rack) & 1u) == 0) {
    // Another worker is asked: the recovery is under way and the PS holds this worker's
    // part. Its answer and the result take a round trip; wait for those, out of the pipe,
    // rather than let the time rule resend this seq again meanwhile (the lead's resend
    // before a rack's request chain ends, a late share of 0.16 on two racks).
    if (!f.deferred) hold_out_of_pipe(f);
    f.fallback_at = std::max(f.fallback_at, now + lead_wait());
    note_timer(f.fallback_at);
    return;
  }
  resend(now, f, stats_.requested_resends, out);
  arm_recheck(now, f);
}

// The recovery of a seq now hangs on this one resend (the others wait for it): if it was lost,
// waiting for the timer would hold the job for its floor (50 ms in the daemons). Checked
// again once, when two recovery waits passed without a result.
void Worker::arm_recheck(Time now, Fragment& f) {
  f.recheck = true;
  f.fallback_at = now + recheck_wait();
  note_timer(f.fallback_at);
}

// A resend flushes whatever the switches hold of the fragment: it no longer holds an aggregator.
void Worker::mark_resend(Fragment& f) {
  if (f.deferred) --deferred_;
  f.recheck = false;
  f.deferred = false;
  ++f.retransmits;
  f.rtt_ambiguous = true;
  release(f);
}

void Worker::resend(Time now, Fragment& f, std::uint64_t& cause, Outbox& out) {
  mark_resend(f);
  ++cause;
  transmit(now, f, true, out);
}

[[gnu::always_inline]] inline void Worker::advance_base() {
  while (base_ != next_seq_ && slot(base_).acked) {
    slot(base_).active = false;
    ++base_;
  }
  if (base_ == next_seq_) earliest_timer_.reset();  // nothing in flight, nothing to time
}

void Worker::retire_finished_tensors() {
  while (!tensors_.empty() && tensors_.front().finished == tensors_.front().fragments) {
    if (&tensors_.front() == sending_) sending_ = nullptr;
    tensors_.pop_front();
    if (send_cursor_ > 0) --send_cursor_;
  }
}

Duration Worker::probe_timeout() const {
  return std::min(rtt_.rto(),
                  std::max<Duration>({2 * rtt_.srtt(), rtt_.srtt() + 4 * rtt_.rttvar(), 1}));
}

// A loss among the last fragments sent has no later result to reveal it, so only the timer
// would, at its floor many round trips away. Two round trips after the last result, the newest
// unanswered fragment is resent (RACK-TLP, RFC 8985): its answer reveals, by the time rule,
// every older fragment still missing. Re-armed by every batch of results, so a flowing window
// is never probed; one probe per silence, checked again like any resend the job waits on
// (arm_recheck), then the timers. Without the check a lost probe or answer at an iteration's
// end held every worker of the job for the timer's floor (382 timeouts in one run, two racks
// at 1 % loss). Armed by results only, not by a submit: at an iteration's start the job's
// other workers may still be computing, which is not loss.
void Worker::arm_probe(Time now) {
  probe_due_.reset();
  if (in_flight_ > 0 && rtt_.has_sample()) probe_due_ = now + probe_timeout();
}

// The newest unanswered fragment of each PS shard: gap detection looks within a shard only, so
// one shard's answer cannot reveal another's tail loss.
void Worker::send_probe(Time now, Outbox& out) {
  probe_due_.reset();
  std::vector<bool> probed(config_.parameter_servers, false);
  std::uint32_t left = config_.parameter_servers;
  for (std::uint32_t u = next_seq_; u != base_ && left > 0;) {
    Fragment& f = slot(--u);
    if (!f.active || f.acked || probed[shard_of(u)]) continue;
    probed[shard_of(u)] = true;
    --left;
    resend(now, f, stats_.probes, out);
    arm_recheck(now, f);
  }
}

void Worker::on_timer(Time now, Outbox& out) {
  if (failed()) return;
  if (join_started_) {  // nothing else is in flight until the run is known
    if (now - *join_started_ >= config_.deadline) {
      fail("job " + std::to_string(config_.job) + " worker " + std::to_string(config_.rack) +
           "/" + std::to_string(config_.rank_in_rack) + ": no run id from the job's first "
           "parameter server after " + std::to_string(config_.deadline / kMillisecond) + " ms; " +
           (config_.claim_run ? "its claim of run " + std::to_string(*config_.run) + " was not answered: "
                              : std::string("not every worker of the job has started, or ")) +
           "the server is unreachable or runs another configuration");
    } else if (now >= join_resend_at_) {
      send_join(now, out);
    }
    return;
  }
  earliest_timer_stale_ = true;
  if (probe_due_ && *probe_due_ <= now) send_probe(now, out);
  // Before the job's first answer it may not have started (a worker still joining: its join
  // was lost, or its process started late), and a window resent at every timeout only repeats
  // what the switches hold. The oldest fragment times out for all; the others wait with it.
  std::optional<Time> asking_until;
  for (std::uint32_t u = base_; u != next_seq_; ++u) {
    Fragment& f = slot(u);
    if (!f.active || f.acked) continue;
    if (now - f.first_sent >= config_.deadline) {
      fail("job " + std::to_string(config_.job) + " worker " + std::to_string(config_.rack) +
           "/" + std::to_string(config_.rank_in_rack) + ": no result for fragment " +
           std::to_string(f.seq) + " of tensor " + std::to_string(f.tensor->id) + " after " +
           std::to_string(config_.deadline / kMillisecond) + " ms and " +
           std::to_string(f.retransmits) + " resends; the switch or parameter server is "
           "unreachable or the job's workers disagree");
      return;
    }
    if ((f.deferred || f.recheck) && f.fallback_at <= now) {
      if (f.deferred && (!f.queried || f.result_sent))
        send_query(now, f, out);
      else
        resend(now, f, stats_.fallback_resends, out);
      continue;
    }
    if (f.rto_deadline > now) continue;
    if (asking_until) {
      f.rto_deadline = *asking_until;
      continue;
    }
    // No window cut: ECN marks say congestion (congestion_window.h), and a silence long enough
    // for a timeout is as often another worker's recovery as this worker's loss.
    mark_resend(f);
    ++f.timeouts;
    ++stats_.timeouts;
    transmit(now, f, true, out);
    if (stats_.results == 0) asking_until = f.rto_deadline;
  }
}

std::optional<Time> Worker::next_timer() const {
  if (failed()) return std::nullopt;
  if (join_started_) return std::min(join_resend_at_, *join_started_ + config_.deadline);
  std::optional<Time> fragments = fragment_timer();
  if (!probe_due_) return fragments;
  return fragments ? std::min(*fragments, *probe_due_) : *probe_due_;
}

std::optional<Time> Worker::fragment_timer() const {
  if (!earliest_timer_stale_) return earliest_timer_;
  earliest_timer_stale_ = false;
  std::optional<Time> next;
  for (std::uint32_t u = base_; u != next_seq_; ++u) {
    const Fragment& f = slot(u);
    if (!f.active || f.acked) continue;
    Time t = std::min(f.rto_deadline, f.first_sent + config_.deadline);
    if (f.deferred || f.recheck) t = std::min(t, f.fallback_at);
    if (!next || t < *next) next = t;
  }
  earliest_timer_ = next;
  return next;
}

AllreduceStatus Worker::status(std::uint32_t tensor) const {
  if (seq_distance(tensor, next_tensor_id_) >= 0)
    throw std::invalid_argument("allreduce: unknown tensor id " + std::to_string(tensor));
  for (const Tensor& t : tensors_)
    if (t.id == tensor)
      return t.finished == t.fragments ? AllreduceStatus::done
             : failed()                ? AllreduceStatus::failed
                                       : AllreduceStatus::pending;
  return AllreduceStatus::done;
}

std::vector<std::uint32_t> Worker::take_completed() {
  std::vector<std::uint32_t> done;
  done.swap(completed_);
  return done;
}

void Worker::fail(std::string message) {
  error_ = std::move(message);
  in_flight_ = 0;
  deferred_ = 0;
  std::fill(holding_.begin(), holding_.end(), 0u);
}

}  // namespace atp::engines
