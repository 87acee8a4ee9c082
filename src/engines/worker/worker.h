#pragma once
// The worker engine: cuts float tensors into fragments, quantizes them, paces them with an
// ECN-driven congestion window, recovers losses, and reassembles the summed results.
//
// Sans-IO: submit() and on_packets()/on_timer() queue datagrams into the caller's Outbox;
// next_timer() says when on_timer() is due. Fragments are read from the caller's input buffer
// (again for every resend) and results written straight into its output buffer: both must
// stay alive, and the input unchanged, until the allreduce completes.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engines/common.h"
#include "engines/counters.h"
#include "engines/home_slice.h"
#include "engines/recovery_lead.h"
#include "engines/worker/aggregator_window.h"
#include "engines/worker/congestion_window.h"
#include "engines/worker/rtt_estimator.h"
#include "proto/header.h"
#include "quant/quantizer.h"

namespace atp::engines {

// Where a job's fragments aggregate. `planned`: where the job's PS plans them
// (engines/ps/aggregator_planner.h: its home slice in turns, and other jobs' idle homes when it
// borrows), each result naming the aggregator of the seq two windows on and the in-flight cap
// that seq leaves under; a seq whose plan was lost takes its home's turn.
// `hash`: aggregator_hash(job, lane) for ever (the paper's ATP).
// `linear`: the lane itself, the same indices for every job (the paper's Fig. 14 strawman:
// jobs sharing a pool collide on every lane).
enum class Placement { planned, hash, linear };
bool parse_placement(const std::string& text, Placement& out);
std::string to_string(Placement p);

struct WorkerConfig {
  std::uint32_t job = 0;
  std::uint8_t rack = 0;         // this worker's rack within the job
  std::uint8_t rank_in_rack = 0; // this worker's bit in its rack's bitmap
  std::uint8_t rack_fan_in = 1;  // workers of the job in this rack
  std::uint8_t job_fan_in = 1;   // racks of the job
  std::uint16_t job_workers = 1; // workers of the job in all racks: bounds the int32 sum
  std::uint16_t values_per_packet = 256;  // K
  // Fragments in flight at most (power of two; the congestion window's ceiling). Seq s uses
  // aggregator lane s mod window, so the job holds at most this many aggregators.
  std::uint32_t window = 64;
  // Seqs tracked at once, holes included (power of two, at least `window`; 0: 16 windows, see
  // ring_or_default). Longer than the window, the worker keeps sending past a fragment waiting
  // for recovery (engines.md §3.6).
  std::uint32_t ring = 0;
  Placement placement = Placement::planned;
  // The job's home slice of the pool and the shards planning it apart (home_slice.h): where
  // `planned` starts, and what a seq whose plan was lost with a result takes (count 0: hashed
  // lanes, as `hash`).
  HomeSlice home;
  std::uint32_t initial_window = 0;  // 0: start at the ceiling
  // false: the window stays at the ceiling whatever ECN marks and timeouts say (the baseline
  // the paper's incast experiment compares with).
  bool congestion_control = true;
  // A second window, A2TP-style (aggregator_window.h): it shrinks with the share of results
  // whose seq met a busy aggregator (`collision`), never above the congestion window; the
  // worker sends within the smaller, but never below kAggregatorWindowFloor of the congestion
  // window. Off: the congestion window alone.
  bool aggregator_window = false;
  float scale = 1 << 16;
  std::uint8_t parameter_servers = 1;
  NodeId uplink = 0;  // the rack switch: the only node results may come from
  std::uint32_t token = 0;  // the job's secret, carried by every packet
  // This run of the job: every worker of a run must use the same one, and a new run of the job
  // on the same switches and PSs another one (see proto::wire_tensor). nullopt: ask the job's
  // first PS before the first fragment leaves (ps/run_registry.h), with `join_nonce`, which
  // must differ from the one this rank used in the job's last launch (a random non-zero one).
  std::optional<std::uint16_t> run = 0;
  std::uint32_t join_nonce = 0;
  // With a given `run`: claim it from the job's first PS before the first fragment leaves (a
  // join naming it, with `join_nonce`); the PS refuses a run another launch of the job used on
  // it, and the worker then fails saying so, where a reused run would have been answered with
  // that launch's kept results. What a launcher's explicit run id gets (libatp, `atp worker
  // --run`); off where every launch is a fresh job (the simulator, controller jobs).
  bool claim_run = false;
  Duration initial_rto = 100 * kMillisecond;
  Duration min_rto = 50 * kMillisecond;
  Duration max_rto = 1 * kSecond;
  std::uint32_t reorder_threshold = 3;
  // A fragment without a result for this long fails the worker with a clear error.
  Duration deadline = 30 * kSecond;
};

// Throws std::invalid_argument naming the first bad field.
void validate(const WorkerConfig& config);

enum class AllreduceStatus { pending, done, failed };

#define ATP_WORKER_STATS(X)                                                                 \
  X(fragments_sent, "first transmissions")                                                  \
  X(timeouts, "resends after a retransmission timeout")                                     \
  X(fast_resends, "resends after a sequence gap")                                           \
  X(probes, "resends of the newest fragment after two round trips without a result")        \
  X(deferred_gaps, "gaps left to the seq's recovery lead for a while")                        \
  X(result_queries, "gaps asked of the PS with the header alone")                           \
  X(lost_down_queries, "of them, instead of a resend: a later result showed theirs sent")   \
  X(fallback_resends, "resends of a gap whose query or recovery brought no result in time")  \
  X(requested_resends, "resends the PS asked for by name")                                    \
  X(float_fragments, "fragments sent as float32 (overflow or on request)")                  \
  X(results, "results taken")                                                               \
  X(done_copies, "of them, header-only: a reduce-scatter shard another worker keeps")        \
  X(duplicate_results, "results for fragments already done")                                \
  X(ecn_marks, "results carrying a congestion mark")                                        \
  X(window_cuts, "congestion window halvings (ECN marks; timeouts never cut it)")           \
  X(collided_results, "results whose seq met a busy aggregator")                            \
  X(remaps, "slots moved to another aggregator")                                            \
  X(malformed, "packets that fail decoding")                                                \
  X(forged, "packets with a wrong token, or not from the uplink")

ATP_COUNTER_STRUCT(WorkerStats, ATP_WORKER_STATS);

// Collisions may hold a job's sending to this share of its congestion window, not lower: a
// collided fragment still reaches its PS, whose links the congestion window already guards,
// so shrinking further only leaves that path idle when the pool is short (docs/simulator.md,
// "Fig. 13a": 0.83 of static at 33 % without the floor, 1.6 with it).
inline constexpr double kAggregatorWindowFloor = 0.5;

// A planned cap holds a seq back so that it finds its aggregator free. When more than this
// share of recent results met busy aggregators anyway (heavy loss leaves partial sums behind
// faster than resends flush them), holding back buys no aggregation and only slows loss
// recovery: the caps yield to the windows until aggregation works again.
inline constexpr double kCapsYieldAt = 0.5;

// A gap this worker does not lead waits this many smoothed round trips for the lead's recovery
// to show (a result, or the PS's request for another worker's part: each comes about a round
// trip after the lead's resend), and as long again after such a request (engines.md §3.6).
// Smoothed, not least, round trips: on real hosts queues and scheduling make answers much
// slower than the least round trip, and waits of two least round trips ran out before the
// lead's recovery could show (docs/benchmarks.md, "Loss on real packets").
inline constexpr Duration kLeadWaitRoundTrips = 2;

// Every resend, whatever found the loss: a timer, a gap or a tail-loss probe.
inline std::uint64_t retransmissions(const WorkerStats& s) {
  return s.timeouts + s.fast_resends + s.probes + s.fallback_resends + s.requested_resends;
}

// A datagram as it reached the worker. `from`: the sending node (kUnknownNode for a stranger;
// nullopt: the caller vouches).
struct Arrival {
  std::span<const std::uint8_t> packet;
  std::optional<NodeId> from;
};

class Worker {
 public:
  explicit Worker(WorkerConfig config);


  // Starts an allreduce of `input` (summed over every worker of the job) into `output`.
  // All workers of a job must submit the same sequence of tensor sizes. Returns the tensor id.
  std::uint32_t submit(Time now, std::span<const float> input, std::span<float> output,
                       Outbox& out);
  // The same for `count` values of `precision` (half precision is quantized straight from the
  // 16-bit values and its results rounded once into them; quant/quantizer.h).
  std::uint32_t submit(Time now, quant::Precision precision, const void* input, void* output,
                       std::size_t count, Outbox& out,
                       std::optional<proto::ResultOwner> owner = std::nullopt);
  // With `owner`, the tensor is one shard of a reduce-scatter: its sum goes to that worker of
  // the job alone (into its `output`), and every other worker learns each fragment is summed
  // from a header-only result, leaving its `output` untouched (it may be null). Every worker
  // submits every shard, in the same order, naming the same owner (docs/protocol.md §8.1).

  // Datagrams that arrived together (one receive call's batch). Each result is taken in turn,
  // and new fragments go out into the window it freed; the round-trip sample, retiring
  // finished tensors and the tail-loss probe's timer run once for the batch, as one QUIC ACK
  // frame answers many packets.
  void on_packets(Time now, std::span<const Arrival> arrivals, Outbox& out);
  // A batch of one.
  void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                 std::optional<NodeId> from = std::nullopt) {
    const Arrival arrival{packet, from};
    on_packets(now, {&arrival, 1}, out);
  }
  void on_timer(Time now, Outbox& out);
  // The control plane lent the job more of the pool or took it back (control/home_lending.h):
  // a seq whose plan was lost takes the new home's turn, as its PS plans. Planned placement
  // only; an empty home is ignored.
  void set_home(const HomeSlice& home);
  // When on_timer() is due. It may be early (on_timer() then does nothing), never late.
  std::optional<Time> next_timer() const;

  AllreduceStatus status(std::uint32_t tensor) const;
  // Ids of allreduces finished since the last call, in completion order.
  std::vector<std::uint32_t> take_completed();
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  bool idle() const { return base_ == end_seq_; }
  // The run this worker's fragments name; nullopt while it still waits for PS 0's answer.
  std::optional<std::uint16_t> run() const { return run_; }

  const WorkerConfig& config() const { return config_; }
  const WorkerStats& stats() const { return stats_; }
  double congestion_window() const { return cwnd_.value(); }
  double aggregator_window() const { return aggregator_window_.value(); }
  Duration smoothed_rtt() const { return rtt_.srtt(); }

 private:
  struct Tensor {
    std::uint32_t id = 0;
    const std::uint8_t* input = nullptr;
    std::uint8_t* output = nullptr;
    std::size_t size = 0;
    std::uint32_t first_seq = 0;
    std::uint32_t fragments = 0;
    std::uint32_t finished = 0;
    quant::Precision precision = quant::Precision::float32;
    std::uint32_t value_bytes = 4;  // of `precision`, in the tensor's memory
    std::uint32_t owner_mark = 0;   // a shard's fragments' remap_index (proto::kResultOwner)
    bool keeps_values = true;       // an allreduce, or this worker's own shard
  };
  // One in-flight fragment, kept in the ring's slot seq mod ring.
  struct Fragment {
    bool active = false;
    bool acked = false;
    bool float_mode = false;
    bool rtt_ambiguous = false;  // sent more than once: no RTT sample from it (Karn)
    bool holding = false;  // counted in holding_: may hold an aggregator
    bool deferred = false;  // a gap out of the pipe until fallback_at: left to its seq's
                            // recovery lead, or its result asked for (ask_for_result)
    bool recheck = false;   // resent by the lead or on request: resent again at fallback_at
    bool queried = false;   // deferred, and its result asked of the PS: at fallback_at resent
                            // (asked again if result_sent)
    bool result_sent = false;  // a later result showed the PS had sent its result: asked for
                               // again at fallback_at (only the timer resends its values)
    std::uint32_t seq = 0;
    Tensor* tensor = nullptr;
    std::size_t offset = 0;
    std::uint16_t count = 0;
    unsigned retransmits = 0;
    unsigned timeouts = 0;
    Time first_sent = 0, last_sent = 0, rto_deadline = 0, fallback_at = 0;
  };

  // What one batch's results leave for after it. The round-trip sample comes from the most
  // recently sent fragment answered (sent once, by Karn): the batch's other results waited in
  // the receive queue for it, which is not round trip (RFC 9002 §5.1 samples the largest
  // acknowledged packet likewise).
  struct BatchResults {
    bool any_result = false;
    std::optional<Time> newest_sent;
    std::optional<Time> newest_launch_sent;  // of the fragments sent before the first result
  };

  void send_join(Time now, Outbox& out);
  // Whether a handshake answer is for this launch's join (its rack, bit and nonce).
  bool answers_our_join(const proto::Header& h) const {
    return !run_ && h.seq == config_.join_nonce && h.rack == config_.rack &&
           h.workers_bitmap == (1u << config_.rank_in_rack);
  }
  void on_joined(Time now, const proto::Header& h, Outbox& out);
  void send_new(Time now, Outbox& out);
  // The per-result path, defined inline (always inlined) in worker.cpp, where its callers are.
  inline void fill_window(Time now, Outbox& out);  // send_new's body
  inline void on_datagram(Time now, const Arrival& arrival, Outbox& out);
  // What on_result reads of a checked result's header (its seq is the fragment's), by value:
  // a decoded header whose address escapes is kept in memory field by field.
  struct ResultFields {
    std::uint8_t flags;
    std::uint32_t remap_index;
    std::uint16_t results_behind;
    bool has(std::uint8_t f) const { return (flags & f) != 0; }
  };
  inline void on_result(Time now, ResultFields h, const std::uint8_t* values, Fragment& f,
                        Outbox& out);
  void take_plan(std::uint32_t seq, std::uint32_t remap_index);
  void finish_batch(Time now);
  // The congestion window follows ECN marks; the aggregator window (when on) follows
  // collisions and stays under the congestion window. Inline: it runs for every result.
  void update_windows(ResultFields result, std::uint32_t seq) {
    cwnd_.on_result(result.has(proto::flag::kEcn), seq, next_seq_);
    stats_.window_cuts = cwnd_.decreases();
    const bool collided = result.has(proto::flag::kCollision);
    if (collided) ++stats_.collided_results;
    collided_share_ += (collided - collided_share_) / 64;
    if (config_.aggregator_window) update_aggregator_window(collided);
  }
  void update_aggregator_window(bool collided);
  std::uint32_t allowed_in_flight() const {  // inline: asked after every result
    if (!config_.aggregator_window) return cwnd_.allowed();
    const auto floor = static_cast<std::uint32_t>(kAggregatorWindowFloor * cwnd_.allowed());
    return std::min(cwnd_.allowed(), std::max(floor, aggregator_window_.allowed()));
  }
  void transmit(Time now, Fragment& f, bool resend, Outbox& out);
  inline void write_fragment(Time now, Fragment& f, bool resend, Outbox& out);  // transmit's
  // Inline: the common case, an in-order answer to a fragment sent once, has nothing before
  // it to reveal, and costs no call.
  void detect_gaps(Time now, const Fragment& acked, std::uint16_t results_behind, Outbox& out) {
    if (acked.rtt_ambiguous || acked.seq != base_)
      scan_for_gaps(now, acked, results_behind, out);
  }
  void scan_for_gaps(Time now, const Fragment& acked, std::uint16_t results_behind,
                     Outbox& out);
  // Whether the result of `acked` (with its results_behind) says the PS had sent the result of
  // `seq`, an earlier seq of the same shard.
  bool result_sent_before(std::uint32_t acked, std::uint16_t results_behind,
                          std::uint32_t seq) const {
    const std::int32_t distance = seq_distance(acked, seq);
    if (distance <= 0) return false;
    const std::uint32_t behind = static_cast<std::uint32_t>(distance) / config_.parameter_servers;
    return behind >= 1 && behind <= proto::kResultsBehind &&
           ((results_behind >> (behind - 1)) & 1u) != 0;
  }
  // Whether this worker resends `seq` at once when it finds it missing (recovery_lead.h).
  bool leads_recovery(std::uint32_t seq) const {
    return engines::leads_recovery(seq, config_.job_fan_in, config_.rack, config_.rack_fan_in,
                                   config_.rank_in_rack);
  }
  void hold_out_of_pipe(Fragment& g);
  void defer_to_lead(Time now, Fragment& g);
  void ask_for_result(Time now, Fragment& g, Outbox& out);
  void arm_recheck(Time now, Fragment& f);
  void take_rtt_sample(Time now);
  void shorten_first_waits(Time now);
  void send_query(Time now, Fragment& f, Outbox& out);
  Duration lead_wait() const {
    return rtt_.has_sample() ? kLeadWaitRoundTrips * rtt_.srtt() : rtt_.rto();
  }
  // How long a resend the seq's recovery hangs on is given before it is checked (arm_recheck).
  Duration recheck_wait() const { return 2 * lead_wait(); }
  // How soon after its latest send an answer to g can come: one least round trip, two for a
  // resend (its answer may wait for a request round).
  Duration answer_due(const Fragment& g) const {
    return rtt_.min_rtt() * (g.retransmits > 0 ? 2 : 1);
  }
  void resend_on_request(Time now, const proto::Header& h, Fragment& f, Outbox& out);
  inline void advance_base();
  void retire_finished_tensors();
  Duration probe_timeout() const;
  void arm_probe(Time now);
  void send_probe(Time now, Outbox& out);
  std::optional<Time> fragment_timer() const;  // the fragments' earliest timer
  // A fragment timer now due at `due`: the cached earliest timer keeps the sooner.
  void note_timer(Time due) {
    if (!earliest_timer_ || due < *earliest_timer_) earliest_timer_ = due;
  }
  void fail(std::string message);
  void plan_first_lanes();  // the lanes before any result: the home's turns (or fixed lanes)
  Fragment& slot(std::uint32_t seq) { return ring_[seq & ring_mask_]; }
  const Fragment& slot(std::uint32_t seq) const { return ring_[seq & ring_mask_]; }
  // The aggregator a seq uses, and how many fragments of its PS shard may be in flight when it
  // leaves (0: the windows alone decide).
  struct LaneAssignment {
    std::uint32_t seq = 0;  // the seq it is for (planned placement)
    std::uint32_t aggregator = 0;
    std::uint32_t in_flight_cap = 0;
  };
  // Seq's assignment: its lane's, if the result plan_lag_ before it arrived (or the lanes are
  // fixed); else the home's turn for it, which is what the PS plans while the job keeps to its
  // home, so a lost result costs nothing then.
  LaneAssignment assignment(std::uint32_t seq) const {
    const LaneAssignment& lane = lanes_[seq & (plan_lag_ - 1)];
    if (lane.seq == seq || !home_turns_) return lane;
    const auto turn = home_.initial(seq, config_.window);
    return {seq, turn->aggregator, turn->in_flight_cap};
  }
  // Fragments of the plan shard of `seq` that may hold an aggregator: what a planned cap
  // bounds. PS shards that borrow plan apart, each over its own aggregators; otherwise the
  // home's turns are one plan for the whole job.
  std::uint32_t plan_shard_of(std::uint32_t seq) const {
    return holding_.size() == 1 ? 0 : seq % static_cast<std::uint32_t>(holding_.size());
  }
  std::uint32_t holding_aggregators(std::uint32_t seq) const {
    return holding_[plan_shard_of(seq)];
  }
  void mark_resend(Fragment& f);
  // Sends f again now, counting it under its cause (one of stats_'s resend counters).
  void resend(Time now, Fragment& f, std::uint64_t& cause, Outbox& out);
  void release(Fragment& f) {
    if (f.holding) --holding_[plan_shard_of(f.seq)];
    f.holding = false;
  }
  // The PS shard that sums `seq`. One PS is the common case; a division per fragment is not
  // free.
  std::uint32_t shard_of(std::uint32_t seq) const {
    return config_.parameter_servers == 1 ? 0 : seq % config_.parameter_servers;
  }

  WorkerConfig config_;
  std::optional<std::uint16_t> run_;
  // The handshake, while run_ is unknown: when it began (nullopt: not yet), next resend due.
  std::optional<Time> join_started_;
  Time join_resend_at_ = 0;
  CongestionWindow cwnd_;
  AggregatorWindow aggregator_window_;  // config_.aggregator_window only
  RttEstimator rtt_;
  std::int32_t quant_limit_;  // |quantized value| at most this, or the fragment goes as floats
  proto::FragmentTemplate fragment_header_;
  std::vector<Fragment> ring_;
  std::uint32_t ring_mask_;  // ring_.size() - 1, kept: slot() runs several times per result
  // A result plans the seq this far after it (home_slice.h); the lanes (the window under
  // hashed or linear placement).
  std::uint32_t plan_lag_;
  HomeSlice home_;
  bool home_turns_;         // planned placement with a home: missing plans take its turns
  std::vector<LaneAssignment> lanes_;  // plan_lag_ lanes: each one's next seq's
  std::deque<Tensor> tensors_;  // submitted and not fully finished, oldest first
  std::size_t send_cursor_ = 0; // index in tensors_ of the tensor holding next_seq_
  // Either nullptr or &tensors_[send_cursor_], kept because indexing a deque divides and
  // fill_window runs per result. References into a deque outlive pushes and pops of other
  // elements; retiring the tensor it points to (send_cursor_ 0) resets it.
  Tensor* sending_ = nullptr;
  std::uint32_t next_tensor_id_ = 0;
  std::uint32_t base_ = 0;      // oldest fragment without a result
  std::uint32_t next_seq_ = 0;  // next fragment to send for the first time
  std::uint32_t end_seq_ = 0;   // one past the last submitted fragment
  std::uint32_t in_flight_ = 0;
  std::uint32_t deferred_ = 0;  // of them, held out of the pipe (hold_out_of_pipe)
  // Per PS shard: fragments in flight never resent, which may hold an aggregator (a resend
  // flushes the switches' state for its seq).
  std::vector<std::uint32_t> holding_;
  double collided_share_ = 0;  // of recent results (gain 1/64 per result)
  // RACK-TLP's tail-loss probe: due two round trips after the last result.
  std::optional<Time> probe_due_;
  std::vector<std::uint32_t> completed_;
  BatchResults batch_;  // of the on_packets() call under way
  // The first result's arrival: fragments sent earlier (the launch window) give provisional
  // round-trip samples only, until path_sampled_ (take_rtt_sample).
  static constexpr Time kNever = std::numeric_limits<Time>::max();
  Time samples_from_ = kNever;
  bool path_sampled_ = false;
  // next_timer() is asked after every event, so it returns a cached lower bound (results
  // remove deadlines, and every earlier one set goes through note_timer) and rescans the
  // in-flight fragments only after a timer fired.
  mutable std::optional<Time> earliest_timer_;
  mutable bool earliest_timer_stale_ = false;
  std::string error_;
  WorkerStats stats_;
};

}  // namespace atp::engines
