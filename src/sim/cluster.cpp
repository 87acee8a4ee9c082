#include "sim/cluster.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "sim/cluster_description.h"
#include "sim/control_plane_node.h"

namespace atp::sim {

namespace {

void validate(const ClusterSpec& spec) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("cluster: " + what); };
  if (spec.jobs.empty()) bad("no jobs");
  if (spec.parameter_servers == 0) bad("need at least one parameter server");
  for (std::size_t j = 0; j < spec.jobs.size(); ++j) {
    const JobSpec& job = spec.jobs[j];
    const std::string name = "job " + std::to_string(j) + ": ";
    int racks = 0, workers = 0;
    for (auto w : job.workers_per_rack) {
      if (w > proto::kMaxFanIn) bad(name + "more than 32 workers in a rack");
      racks += w > 0;
      workers += w;
    }
    if (workers == 0) bad(name + "no workers");
    if (racks > static_cast<int>(proto::kMaxFanIn)) bad(name + "more than 32 racks");
  }
}

}  // namespace

bool ClusterReport::all_exact() const {
  return std::all_of(jobs.begin(), jobs.end(), [](const JobReport& j) { return j.exact; });
}

namespace {

// The cluster under construction: switches, servers, workers, and the control plane that
// installs each job's switch entries while the run goes on. Every entry and engine setting
// comes from the control plane's derivation (control::ClusterConfig) of the cluster's
// description (describe), through an address book whose ids are the simulator's node ids.
class ClusterBuild {
 public:
  ClusterBuild(const ClusterSpec& spec, Simulator& sim);
  void run();
  ClusterReport report() const;

 private:
  NodeId add(std::unique_ptr<Node> node, const runtime::Endpoint& address);
  std::pair<NodeId, SwitchNode*> add_switch(const std::string& name,
                                            const runtime::Endpoint& address);
  NodeId add_worker(std::uint32_t j, const engines::WorkerConfig& c, std::uint32_t rank);
  void add_job_nodes(std::uint32_t j);
  void install_jobs();
  JobReport job_report(std::uint32_t j) const;
  void write_traces() const;

  const ClusterSpec& spec_;
  Simulator& sim_;
  control::ClusterConfig config_;
  runtime::AddressBook book_;
  ControlPlaneNode* control_ = nullptr;
  NodeId control_id_ = 0;
  std::vector<std::pair<NodeId, SwitchNode*>> rack_switches_;
  std::pair<NodeId, SwitchNode*> spine_;
  std::vector<std::vector<PsNode*>> servers_;  // per job, by shard
  std::vector<std::unique_ptr<JobVerifier>> verifiers_;
  std::vector<std::vector<TrainingWorkerNode*>> workers_;
  std::vector<std::pair<NodeId, TrainingWorkerNode*>> all_workers_;
};

ClusterBuild::ClusterBuild(const ClusterSpec& spec, Simulator& sim)
    : spec_(spec), sim_(sim), config_(describe(spec)), servers_(spec.jobs.size()),
      workers_(spec.jobs.size()) {
  auto control = std::make_unique<ControlPlaneNode>();
  control_ = control.get();
  control_id_ = add(std::move(control), control_address());
  const std::size_t racks = config_.switches().size() - 1;  // and the spine
  for (std::size_t r = 0; r < racks; ++r)
    rack_switches_.push_back(add_switch(rack_name(r), rack_address(r)));
  spine_ = add_switch(kSpineName, spine_address());
  for (const auto& [id, node] : rack_switches_) sim_.connect(id, spine_.first, spec.core_link);
  // Every node first, then the entries: deriving them looks every member up in the book.
  for (std::uint32_t j = 0; j < spec.jobs.size(); ++j) add_job_nodes(j);
  install_jobs();
}

// A node and its address, so that the book's id for the address is the node's id.
NodeId ClusterBuild::add(std::unique_ptr<Node> node, const runtime::Endpoint& address) {
  const NodeId id = sim_.add_node(std::move(node));
  if (book_.id_of(address) != id)
    throw std::logic_error("cluster: address book out of step with the simulator's nodes");
  return id;
}

std::pair<NodeId, SwitchNode*> ClusterBuild::add_switch(const std::string& name,
                                                        const runtime::Endpoint& address) {
  auto node = std::make_unique<SwitchNode>(config_.switch_config(name), !spec_.trace_dir.empty());
  SwitchNode* raw = node.get();
  const NodeId id = add(std::move(node), address);
  raw->set_id(id);
  return {id, raw};
}

NodeId ClusterBuild::add_worker(std::uint32_t j, const engines::WorkerConfig& c,
                                std::uint32_t rank) {
  auto node = std::make_unique<TrainingWorkerNode>(c, spec_.jobs[j].plan, rank, *verifiers_[j]);
  TrainingWorkerNode* raw = node.get();
  raw->on_finished([this, j] { control_->worker_finished(j); });
  const NodeId id = add(std::move(node), worker_address(j, rank));
  sim_.connect(id, c.uplink, spec_.host_link);
  workers_[j].push_back(raw);
  all_workers_.emplace_back(id, raw);
  return id;
}

// Every job has its own parameter servers, each on its own host behind the PS-rack switch.
void ClusterBuild::add_job_nodes(std::uint32_t j) {
  for (unsigned p = 0; p < spec_.parameter_servers; ++p) {
    auto node = std::make_unique<PsNode>();
    PsNode* raw = node.get();
    const NodeId id = add(std::move(node), server_address(j, p));
    raw->set_id(id);
    servers_[j].push_back(raw);
    sim_.connect(id, spine_.first, spec_.host_link);
  }
  const control::JobConfig& job = config_.job(j);
  for (std::uint32_t rank = 0; rank < job.workers.size(); ++rank) {
    engines::WorkerConfig c = config_.worker_config(j, rank, book_, spec_.worker_defaults);
    // Each worker asks the job's first PS for its run, as a real launch does.
    c.run = std::nullopt;
    c.join_nonce = join_nonce(spec_.seed, j, rank);
    if (rank == 0)
      verifiers_.push_back(std::make_unique<JobVerifier>(spec_.jobs[j].gradients, j,
                                                         c.job_workers, c.values_per_packet,
                                                         c.scale));
    add_worker(j, c, rank);
  }
}

// The parameter servers get their entries now; the switch entries wait in the control
// plane's plan for each job's arrival. Each switch's entries are derived once, for all jobs.
void ClusterBuild::install_jobs() {
  std::vector<ControlPlaneNode::JobPlan> plans(spec_.jobs.size());
  for (std::uint32_t j = 0; j < plans.size(); ++j)
    plans[j] = {spec_.jobs[j].plan.start, {}, workers_[j].size()};
  auto plan_entries = [&](const std::string& name, SwitchNode* node) {
    for (const engines::SwitchJob& entry : config_.switch_jobs(name, book_))
      plans[entry.job].entries.emplace_back(node, entry);
  };
  for (std::size_t r = 0; r < rack_switches_.size(); ++r)
    plan_entries(rack_name(r), rack_switches_[r].second);
  plan_entries(kSpineName, spine_.second);
  for (std::uint32_t j = 0; j < plans.size(); ++j) control_->plan(j, std::move(plans[j]));
  for (std::uint32_t j = 0; j < servers_.size(); ++j)
    for (unsigned p = 0; p < servers_[j].size(); ++p)
      for (engines::PsJob entry : config_.server_jobs(server_name(j, p), book_)) {
        entry.first_run = static_cast<std::uint16_t>(entry.token >> 16);  // a launch's draw
        servers_[j][p]->ps().add_job(entry);
      }
}

void ClusterBuild::run() {
  control_->start(sim_, control_id_);  // before the workers: a job's entries precede its packets
  for (auto& [id, node] : all_workers_) node->start(sim_, id);
  sim_.run(spec_.time_limit);
  if (!spec_.trace_dir.empty()) write_traces();
}

void ClusterBuild::write_traces() const {
  for (std::size_t r = 0; r < rack_switches_.size(); ++r)
    conformance::write_trace_file(spec_.trace_dir + "/" + rack_name(r) + ".jsonl",
                                  rack_switches_[r].second->trace());
  conformance::write_trace_file(spec_.trace_dir + "/" + kSpineName + ".jsonl",
                                spine_.second->trace());
}

JobReport ClusterBuild::job_report(std::uint32_t j) const {
  const JobSpec& job = spec_.jobs[j];
  JobReport r;
  r.job = j;
  r.iterations = job.plan.iterations;
  for (std::size_t size : job.plan.tensor_sizes) r.tensor_bytes += size * 4;
  r.tensor_bytes *= job.plan.iterations;
  r.finished = true;
  Duration communication = 0;
  for (const TrainingWorkerNode* w : workers_[j]) {
    r.finished &= w->finished();
    if (w->failed() && r.error.empty()) r.error = w->worker().error();
    r.completion_time = std::max(r.completion_time, w->finish_time());
    communication += w->communication_time();
    engines::add_counters(r.workers, w->worker().stats());
  }
  r.communication_time = communication / static_cast<Duration>(workers_[j].size());
  r.switches = control_->switch_counters(j);
  r.static_first = control_->static_first(j);
  r.departed = control_->departed(j);
  for (const PsNode* s : servers_[j])
    if (const auto* c = s->ps().job_counters(j)) engines::add_counters(r.ps, *c);
  r.results_checked = verifiers_[j]->checked();
  r.mismatches = verifiers_[j]->mismatches();
  const std::uint64_t expected_checks =
      std::uint64_t{workers_[j].size()} * job.plan.iterations * job.plan.tensor_sizes.size();
  r.exact = r.finished && r.mismatches == 0 && r.results_checked == expected_checks;
  r.fraction_in_network =
      r.ps.completed ? static_cast<double>(r.ps.completed_in_network) / r.ps.completed : 0;
  return r;
}

ClusterReport ClusterBuild::report() const {
  ClusterReport report;
  report.events = sim_.events();
  report.trace_hash = sim_.trace_hash();
  report.end_time = sim_.now();
  report.links = sim_.link_totals();
  for (const auto& [id, s] : rack_switches_)
    engines::add_counters(report.switches, s->pipeline().counters());
  engines::add_counters(report.switches, spine_.second->pipeline().counters());
  for (std::uint32_t j = 0; j < spec_.jobs.size(); ++j) report.jobs.push_back(job_report(j));
  return report;
}

}  // namespace

ClusterReport run_cluster(const ClusterSpec& spec, const Simulator::DropFilter& drop_filter) {
  validate(spec);
  Simulator sim(spec.seed);
  sim.set_drop_filter(drop_filter);
  ClusterBuild cluster(spec, sim);
  cluster.run();
  return cluster.report();
}

}  // namespace atp::sim
