#pragma once
// The control plane's view of a cluster, read from one TOML file that every daemon and worker
// shares: switches, parameter servers, and jobs with their workers. Everything an engine needs
// (fan-ins, multicast groups, routes, static slices, shard indices) is derived here, so the
// switch, the PS and the workers can never disagree about a job. docs/configuration.md has
// the format; examples/ has one-rack and two-rack files.
#include <cstdint>
#include <string>
#include <vector>

#include "control/slice_allocator.h"
#include "engines/ps/parameter_server.h"
#include "engines/switch/switch_pipeline.h"
#include "engines/worker/worker.h"
#include "runtime/endpoint.h"

namespace atp::control {

// Where a P4 switch's ports lead: only the P4 control plane reads it (`atp p4 config`); a
// software switch talks through its socket. A P4 switch rewrites the addresses of what it sends
// (p4/common/next_hop.p4), so it must know each neighbour's port and MAC.
struct P4Port {
  std::uint16_t port = 0;     // the target's port number
  std::uint32_t peer_ip = 0;  // the host or switch at the other end, host order
  std::uint64_t peer_mac = 0;
};

struct P4Wiring {
  std::uint64_t mac = 0;  // the switch's own: the source of what it sends
  std::vector<P4Port> ports;
  // Tofino: front-panel ports in loopback mode that packets go round through for their later
  // passes, beside each pipe's recirculation port (docs/p4.md, "What recirculation costs").
  std::vector<std::uint16_t> loopback_ports;
  bool empty() const { return ports.empty(); }
};

struct SwitchSpec {
  std::string name;
  runtime::Endpoint address;
  proto::Level level = proto::Level::rack;
  std::uint32_t aggregators = 1024;
  std::uint16_t values_per_aggregator = 256;  // K: values per packet
  std::uint8_t passes = 1;                    // pipeline passes per packet (K / passes each)
  engines::Policy policy = engines::Policy::atp;
  std::string uplink;  // name of the level-2 switch; empty: straight to the PSs
  // Cores: each thread serves its own UDP port (address port + i), its own share of the pool
  // and its own jobs (those whose id mod threads is i).
  unsigned threads = 1;
  // A software switch marks what it sends (ECN) while the kernel holds more than
  // `ecn_backlog_bytes` of what it sent for its socket (still queued at the egress device) or
  // more than `ecn_receive_backlog_bytes` received and unread (its CPU cannot keep up); the P4
  // program marks from its egress queue's depth instead. 0: never. Kernel bytes, about twice
  // the wire bytes for ATP's datagrams. Measured in docs/benchmarks.md: 32-64 KiB of egress
  // cede most of a link to a TCP flow; receive thresholds near the egress one mark a busy
  // host's scheduling gaps.
  std::uint32_t ecn_backlog_bytes = 128 << 10;
  std::uint32_t ecn_receive_backlog_bytes = 1 << 20;
  P4Wiring p4;  // keys `mac` and `ports`; empty for a software switch
  // The daemon's control socket (`atp ctl`, the controller): default /tmp/atp-NAME.sock.
  std::string control;
};

struct ServerSpec {
  std::string name;
  runtime::Endpoint address;
  std::string control;  // as SwitchSpec::control
  // The most memory its jobs' state may take at their worst (ParameterServer::memory_bound);
  // an admission beyond it is refused. 0: half of the machine's memory.
  std::uint64_t memory_budget_mb = 0;
};

// Where a daemon named `name` listens for control requests when the file does not say.
std::string default_control_socket(const std::string& name);

struct WorkerSpec {
  std::string rack;  // name of its level-1 switch
  runtime::Endpoint address;
};

struct JobConfig {
  std::uint32_t id = 0;
  std::uint32_t window = 64;
  std::uint32_t ring = 0;  // seqs each worker tracks at once (0: 16 windows; engines/common.h)
  bool congestion_control = true;  // false: the workers' windows never shrink (a baseline)
  bool aggregator_window = false;   // the workers' second, collision-driven window (A2TP-style)
  // The PSs plan some seqs on aggregators of other jobs' home slices while those look idle
  // (aggregator_planner.h); off: each job keeps to its home.
  bool borrow_aggregators = false;
  engines::Placement placement = engines::Placement::planned;  // where its fragments aggregate
  // Fragments in flight when a worker starts, before slow start (0: the ceiling at once). 16:
  // a job starting on a busy link does not overflow its queue in its first round trip
  // (docs/benchmarks.md: the incast run's shaper drops fall from about 500 to 0).
  std::uint32_t initial_window = 16;
  std::uint16_t values_per_packet = 256;
  float scale = 0;  // 0: from max_gradient
  float max_gradient = 1.0f;
  std::vector<std::string> parameter_servers;
  std::vector<WorkerSpec> workers;  // job rank = position
  Duration deadline = 30 * kSecond;
  std::uint32_t token = 0;  // the job's secret; every packet carries it
  // Static policy: aggregators this job holds on each switch thread it uses (0: an equal share
  // of the pool with the file's other jobs that name none).
  std::uint32_t static_aggregators = 0;
  // Planned placement: the job's home slice of the pool, when the control plane gave one
  // (home_count 0: the slice static partitioning gives it among the file's jobs). A file's jobs
  // all share one cut of the pool; the controller admits one job at a time and assigns each
  // a home of its own instead (JobBook::assign_home).
  std::uint32_t home_first = 0, home_count = 0;
};

// The job as a `[[job]]` table of a cluster file: what parse() reads back to the same job.
std::string job_toml(const JobConfig& job);

class ClusterConfig {
 public:
  // Throws std::invalid_argument with the file and the problem.
  static ClusterConfig load(const std::string& path);
  static ClusterConfig parse(const std::string& toml_text, const std::string& origin = "config");
  // A description built in code (the simulator's), checked like a file.
  static ClusterConfig from_parts(std::vector<SwitchSpec> switches, std::vector<ServerSpec> servers,
                                  std::vector<JobConfig> jobs, const std::string& origin);
  // This fabric (switches and servers) with the jobs of `jobs_toml` ([[job]] tables only) in
  // place of its own: how a daemon reads a job the controller admits. Throws like parse().
  ClusterConfig with_jobs_from(const std::string& jobs_toml, const std::string& origin) const;

  const std::vector<SwitchSpec>& switches() const { return switches_; }
  const std::vector<ServerSpec>& servers() const { return servers_; }
  const std::vector<JobConfig>& jobs() const { return jobs_; }

  const SwitchSpec& switch_named(const std::string& name) const;
  const ServerSpec& server_named(const std::string& name) const;
  const JobConfig& job(std::uint32_t id) const;

  // What to install on switch `name`; NodeIds come from `book`.
  engines::SwitchConfig switch_config(const std::string& name) const;
  std::vector<engines::SwitchJob> switch_jobs(const std::string& name,
                                              runtime::AddressBook& book) const;
  // Which thread of switch `name` serves job `job`, and the address it listens on for it.
  unsigned thread_of(const std::string& name, std::uint32_t job) const;
  runtime::Endpoint address_for(const std::string& name, std::uint32_t job) const;
  // The switch that talks to job `id`'s parameter servers and fans its results out: its
  // racks' shared level-2 switch, or its one rack switch.
  const std::string& top_switch(std::uint32_t id) const;
  // Job `id`'s slice of the pool of switch `name`'s thread serving it, cut as static
  // partitioning cuts it: its static slice, and under the other policies its PS's home for
  // the aggregator plan.
  Slice home_slice(const std::string& name, std::uint32_t id) const;
  // The home the job's PSs and workers plan on (its slice of the largest pool among its
  // racks' switches) and the shards planning it apart; `pool`, if given, gets that pool.
  engines::HomeSlice home_of(const JobConfig& job, std::uint32_t* pool = nullptr) const;
  // What to install on parameter server `name`.
  std::vector<engines::PsJob> server_jobs(const std::string& name,
                                          runtime::AddressBook& book) const;
  // The token job `id`'s packets carry: the file's `token` mixed with a digest of everything
  // the job's parties must agree on (window, ring, K, scale, servers, workers), so parties started
  // from different files never sum together.
  std::uint32_t wire_token(std::uint32_t id) const;
  // The engine configuration of worker `rank` of job `id`: `base` (timers, limits) with the
  // job's fields filled in.
  engines::WorkerConfig worker_config(std::uint32_t id, std::size_t rank,
                                      runtime::AddressBook& book,
                                      engines::WorkerConfig base = {}) const;
  // Where each rank of job `id` sits, in rank order: its rack within the job and its bit in
  // that rack (what a reduce-scatter shard's fragments name as its owner).
  std::vector<proto::ResultOwner> rank_positions(std::uint32_t id) const;

 private:
  struct Placement {  // a job's racks, derived from its workers
    std::vector<std::string> racks;           // job rack index -> switch name
    std::vector<std::uint8_t> workers_per_rack;
    std::vector<std::uint8_t> rack_of, rank_in_rack;  // per job rank
  };
  Placement placement(const JobConfig& job) const;
  void validate(const std::string& origin) const;
  void validate_static_slices(const std::string& origin) const;
  const SwitchSpec* spine_of(const JobConfig& job) const;
  runtime::Endpoint results_via(const JobConfig& job) const;
  float scale_of(const JobConfig& job) const;
  bool serves(const SwitchSpec& s, const JobConfig& job) const;

  std::vector<SwitchSpec> switches_;
  std::vector<ServerSpec> servers_;
  std::vector<JobConfig> jobs_;
};

}  // namespace atp::control
