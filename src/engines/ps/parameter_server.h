#pragma once
// The parameter server engine: finishes every sum the switches could not, exactly.
//
// Per (job, seq) it accepts a contribution only if it shares no worker with what it holds
// (all-or-nothing dedup, see contributor_set.h), answers with the result through the switches,
// keeps that result for late resends until every worker provably moved on, falls back to a
// float sum when integers overflow, and plans where the job's next fragments aggregate
// (aggregator_planner.h).
// Sans-IO and timer-free: workers drive all retransmission.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engines/common.h"
#include "engines/counters.h"
#include "engines/ps/aggregator_planner.h"
#include "engines/ps/contributor_set.h"
#include "engines/ps/run_registry.h"
#include "proto/header.h"

namespace atp::engines {

struct PsJob {
  std::uint32_t job = 0;
  std::vector<std::uint8_t> workers_per_rack;  // one entry per rack of the job
  std::uint32_t window = 64;  // the workers' window (power of two): their aggregator lanes
  std::uint16_t values_per_packet = 256;       // K
  NodeId downstream = 0;  // the switch that fans results out to the job's workers
  std::uint8_t ps_index = 0;  // this server's shard: it owns seqs with seq % num_ps == ps_index
  // Aggregators per switch, for the aggregator plan carried in every result
  // (aggregator_planner.h); 0 plans nothing.
  std::uint32_t pool_size = 0;
  std::uint32_t token = 0;  // packets of the job must carry it, and come from `downstream`
  // Where the job's run ids start (see run_registry.h): the daemon draws it at random. Only
  // PS 0 of a job answers workers asking for their run.
  std::uint16_t first_run = 0;
  std::uint32_t ring = 0;  // the workers' ring (0: ring_or_default): two entries per slot
  // The job's home slice of the pool and the shards planning it, as its workers have it
  // (home_slice.h): where the plan starts.
  HomeSlice home;
  bool borrow = false;  // plan on other jobs' idle home aggregators too
  std::uint32_t parameter_servers = 1;  // num_ps, the job's shards: results_behind steps by it
};

// Per job. X(name, meaning)
#define ATP_PS_JOB_COUNTERS(X)                                                              \
  X(contributions, "accepted integer contributions")                                        \
  X(duplicates, "contributions that overlapped what was held: dropped whole")               \
  X(superseded, "held sums replaced by a sum that includes them")                           \
  X(completed, "seqs completed")                                                            \
  X(completed_in_network, "seqs that arrived as one sum already complete")                  \
  X(done_copies, "header-only results: a reduce-scatter shard's seq summed, for its non-owners") \
  X(float_fallbacks, "seqs switched to float32")                                            \
  X(float_requests, "float requests sent to the workers")                                   \
  X(late_results, "results sent again for late packets")                                    \
  X(queries, "result queries: a worker had no result for a seq")                            \
  X(answered_queries, "of them, answered with the result kept")                             \
  X(queries_over_budget, "queries not answered: the asker was past its budget of answers")   \
  X(late_asks_covered, "late packets and queries a copy sent since answered already")       \
  X(resend_requests, "requests naming the workers a resent seq still lacks")                 \
  X(stale, "packets for seqs every worker has moved past")                                  \
  X(collided, "packets that had met a busy aggregator")                                     \
  X(plans, "results naming their slot's next aggregator")                                   \
  X(borrowed, "seqs planned on an aggregator outside the job's home slice")                 \
  X(borrowed_collided, "of them, seqs that met a busy aggregator there")                    \
  X(home_collided, "seqs that met a busy aggregator in the home slice")                     \
  X(rejected, "packets that disagree with the job's configuration")                         \
  X(forged, "packets with a wrong token, or not from the job's switch")                     \
  X(joins, "workers asking for their run (retries included)")                               \
  X(runs_started, "launches after the first: a worker came with a new nonce")             \
  X(runs_refused, "claims of a run id another launch of the job used (refused)")             \
  X(packets_in, "the job's packets taken in (joins, stale and duplicate ones included)")     \
  X(bytes_in, "their bytes: the PS's ingress load")

#define ATP_PS_COUNTERS(X)                                                                  \
  X(malformed, "packets that fail decoding")                                                \
  X(unknown_job, "packets of a job the server does not hold")                               \
  X(misrouted, "packets whose ps_index is another server's")

ATP_COUNTER_STRUCT(PsJobCounters, ATP_PS_JOB_COUNTERS);
ATP_COUNTER_STRUCT(PsCounters, ATP_PS_COUNTERS);

class ParameterServer {
 public:
  ParameterServer() = default;

  void add_job(PsJob job);  // throws std::invalid_argument on a bad job
  bool remove_job(std::uint32_t job);
  // The control plane lent the job more of the pool or took it back (control/home_lending.h):
  // its plans keep to `home` from now on (AggregatorPlanner::set_home). False: no such job.
  bool set_home(std::uint32_t job, const HomeSlice& home);

  // `from`: the sending node (kUnknownNode for a stranger; nullopt: the caller vouches).
  void on_packet(Time now, std::span<const std::uint8_t> packet, Outbox& out,
                 std::optional<NodeId> from = std::nullopt);

  const PsCounters& counters() const { return counters_; }
  const PsJobCounters* job_counters(std::uint32_t job) const;
  std::vector<std::uint32_t> jobs() const;
  const PsJob* job(std::uint32_t job) const;  // the installed entry, or null
  // Per-seq entries holding state for `job` (bounded by 2 x ring).
  std::size_t entries_in_use(std::uint32_t job) const;

  // The most memory job `config`'s state can take: every entry of its ring in use, each with
  // its integer sum, its result and a float row per worker (a tenant can put every seq in
  // float mode). What a daemon's memory budget counts.
  static std::uint64_t memory_bound(const PsJob& config);

 private:
  struct Entry {
    bool used = false, complete = false, float_mode = false, ecn = false, collided = false;
    std::uint32_t tensor = 0, seq = 0, aggregator = 0;
    std::uint16_t value_count = 0;
    // A reduce-scatter shard's seq: its owner's proto::encode_result_owner (0: an allreduce's
    // seq, its result to every worker). Every contribution must name the same.
    std::uint32_t owner_mark = 0;
    std::uint32_t parts = 0;  // accepted contributions
    ContributorSet held;      // integer contributions summed so far
    ContributorSet moved_on;  // workers that sent seq + ring, so have this result
    ContributorSet asked;     // workers a resend request named: each is asked once
    // Workers that asked for the result after it left, each answered by a copy sent since
    // (engines.md §3.6, "late copies"), and whether a copy went to every worker.
    ContributorSet late_askers;
    bool copied_to_all = false;
    std::vector<std::int64_t> sum;
    std::vector<float> floats;  // float mode: one row of K per worker
    std::vector<std::uint8_t> result;
  };
  // Each worker's answers to its queries: a query is header-only (44 bytes) and its answer a
  // kept result (multicast to the job's members until late copies were addressed, which let a
  // member asking without end draw 20x its bytes out of the fabric: issue 49 item 1; a seq's
  // recovery lead still gets its copy sent to all). A worker queries a seq at most once per
  // timer (never under 50 ms) and on gaps results reveal, at most a window of seqs each: a
  // budget of kQueryBurstRings rings per kQueryBudgetPeriod is never reached by recovery.
  struct QueryBudget {
    bool started = false;  // a first query finds the whole burst
    double left = 0;
    Time at = 0;
  };
  static constexpr Duration kQueryBudgetPeriod = 50 * kMillisecond;
  static constexpr std::uint32_t kQueryBurstRings = 4;
  struct Job {
    PsJob config;
    std::vector<std::uint32_t> full_masks;  // each rack's workers
    std::vector<std::uint32_t> worker_offset;  // row of rack r's first worker in Entry::floats
    std::uint32_t workers = 0;
    std::uint32_t ring = 0;      // config.ring, or its default
    std::vector<Entry> entries;  // two per ring slot
    AggregatorPlanner planner{PlannerSetup{}};
    RunRegistry runs{0, 0};
    std::vector<QueryBudget> query_budgets;  // per worker (worker_offset[rack] + bit)
    PsJobCounters counters;
  };

  Job* admit(std::span<const std::uint8_t> packet, std::optional<NodeId> from, proto::Header& h);
  bool consistent(const Job& job, const proto::Header& h) const;
  bool took_floats(Job& job, Entry& e, const proto::Header& h,
                   std::span<const std::uint8_t> packet, Outbox& out);
  void add_contribution(Job& job, Entry& e, const proto::Header& h, const ContributorSet& who,
                        std::span<const std::uint8_t> packet, Outbox& out);
  void answer_join(Job& job, const proto::Header& h, Time now, Outbox& out);
  void answer_query(Job& job, const proto::Header& h, Outbox& out);
  bool within_query_budget(Job& job, const proto::Header& h);
  Entry* kept_entry(Job& job, const proto::Header& h);
  bool answer_late(Job& job, Entry& e, const ContributorSet& askers, Outbox& out);
  bool behind_kept_state(const Job& job, const proto::Header& h) const;
  void send_resend_request(Job& job, std::uint32_t tensor, std::uint32_t seq,
                           std::uint32_t aggregator, std::uint8_t rack, std::uint32_t names,
                           Outbox& out);
  void send_joined(const Job& job, std::uint8_t rack, unsigned bit, std::uint32_t nonce,
                   std::uint16_t run, Outbox& out, bool refused = false);
  Entry* entry_for(Job& job, const proto::Header& h);
  void note_moved_on(Job& job, const proto::Header& h, const ContributorSet& who);
  void add_integers(Entry& e, const proto::Header& h, std::span<const std::uint8_t> packet);
  void enter_float_mode(Job& job, Entry& e, Outbox& out);
  void add_floats(Job& job, Entry& e, const proto::Header& h, std::span<const std::uint8_t> packet,
                  Outbox& out);
  void finish_integers(Job& job, Entry& e, Outbox& out);
  void finish_floats(Job& job, Entry& e, Outbox& out);
  std::uint8_t* result_payload(Entry& e);
  // Sends e.result, whose values result_payload() holds, with its header.
  void send_result(Job& job, Entry& e, bool floats, Outbox& out);
  void send_float_request(Job& job, const Entry& e, Outbox& out);
  void request_missing(Job& job, Entry& e, Outbox& out);
  proto::Header downward_header(const Job& job, const Entry& e) const;
  proto::Header downward_header(const Job& job, std::uint32_t tensor, std::uint32_t seq,
                                std::uint32_t aggregator) const;
  std::uint16_t results_behind(const Job& job, const Entry& e) const;
  void send_kept_result(Job& job, Entry& e, Outbox& out,
                        std::optional<std::pair<unsigned, unsigned>> to);
  // e.result to one worker (rack, bit) or every worker; a shard's values to its owner alone,
  // and a done copy (its header) to the others named.
  void send_copies(Job& job, Entry& e, Outbox& out,
                   std::optional<std::pair<unsigned, unsigned>> to);
  void send_copy(const Job& job, const Entry& e, Outbox& out,
                 std::optional<std::pair<unsigned, unsigned>> to, bool values);

  std::unordered_map<std::uint32_t, Job> jobs_;
  PsCounters counters_;
  Time now_ = 0;  // the packet at hand's arrival: the planner's clock
};

}  // namespace atp::engines
