#include "sim/cluster.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

#include "sim/cluster_description.h"
#include "sim/control_plane_node.h"
#include "sim/ring_allreduce.h"

namespace atp::sim {

namespace {

void validate(const ClusterSpec& spec) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("cluster: " + what); };
  if (spec.jobs.empty()) bad("no jobs");
  if (spec.cluster) {  // the file's jobs, one JobSpec (plan and gradients) each, in its order
    if (spec.jobs.size() != spec.cluster->jobs().size())
      bad(std::to_string(spec.cluster->jobs().size()) + " jobs in the cluster file, " +
          std::to_string(spec.jobs.size()) + " training plans");
    for (const auto& s : spec.cluster->switches())
      if (s.threads != 1) bad("switch '" + s.name + "': the simulator runs one thread per switch");
    return;
  }
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
    const TrainingPlan& plan = job.plan;
    if (!plan.ready.empty()) {
      if (plan.ready.size() != plan.tensor_sizes.size())
        bad(name + "one ready time per tensor, or none");
      if (!std::is_sorted(plan.ready.begin(), plan.ready.end()) || plan.ready.front() < 0 ||
          plan.ready.back() > plan.compute)
        bad(name + "ready times must rise from 0 to at most the compute time");
    }
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
// description (a cluster file, or describe(spec)), through an address book whose ids are the
// simulator's node ids. Jobs are indexed by their position in the description.
class ClusterBuild {
 public:
  ClusterBuild(const ClusterSpec& spec, Simulator& sim);
  void run();
  void run_control_plane_until(Time when);
  ClusterReport report() const;
  InstalledEntries installed() const;

 private:
  NodeId add(std::unique_ptr<Node> node, const runtime::Endpoint& address);
  void add_switch(const control::SwitchSpec& s);
  NodeId add_worker(std::size_t j, const engines::WorkerConfig& c, std::uint32_t rank);
  std::unique_ptr<Collective> collective(std::size_t j, const engines::WorkerConfig& c,
                                         std::uint32_t rank);
  void route_to(NodeId worker, NodeId rack_switch);
  void link_rings();
  void add_server(const std::string& name, const std::string& top_switch);
  void add_job_nodes(std::size_t j);
  void install_jobs();
  std::optional<engines::HomeSlice> lendable_home(std::size_t j) const;
  void rehome(std::uint32_t job, const engines::HomeSlice& home);
  JobReport job_report(std::size_t j) const;
  engines::PsJobCounters ps_counters(std::size_t j) const;  // summed over the job's PSs
  JobInterval job_totals(std::size_t j) const;  // since the start
  void run_sampling();
  void write_traces() const;
  std::uint32_t job_id(std::size_t j) const { return config_.jobs()[j].id; }

  const ClusterSpec& spec_;
  Simulator& sim_;
  control::ClusterConfig config_;
  runtime::AddressBook book_;
  ControlPlaneNode* control_ = nullptr;
  NodeId control_id_ = 0;
  std::map<std::string, std::pair<NodeId, SwitchNode*>> switches_;  // by name
  std::map<std::string, PsNode*> servers_;                          // by name
  std::vector<std::unique_ptr<JobVerifier>> verifiers_;
  std::vector<std::vector<TrainingWorkerNode*>> workers_;  // per job index
  std::vector<std::pair<NodeId, TrainingWorkerNode*>> all_workers_;
  std::vector<std::vector<RingAllreduce*>> rings_;  // per job index: its ring members by rank
  std::map<NodeId, SwitchNode*> switch_by_id_;
  std::map<NodeId, NodeId> uplink_of_;  // switch id -> its uplink switch's id
  std::vector<SeriesSample> series_;
};

ClusterBuild::ClusterBuild(const ClusterSpec& spec, Simulator& sim)
    : spec_(spec), sim_(sim), config_(spec.cluster ? *spec.cluster : describe(spec)),
      workers_(spec.jobs.size()), rings_(spec.jobs.size()) {
  auto control = std::make_unique<ControlPlaneNode>();
  control_ = control.get();
  control_id_ = add(std::move(control), control_address());
  for (const auto& s : config_.switches()) add_switch(s);
  for (const auto& s : config_.switches())
    if (!s.uplink.empty()) {
      const NodeId id = switches_.at(s.name).first, up = switches_.at(s.uplink).first;
      sim_.connect(id, up, spec.core_link);
      uplink_of_[id] = up;
      switches_.at(s.name).second->set_default_route(up);
    }
  // Every node first, then the entries: deriving them looks every member up in the book.
  for (std::size_t j = 0; j < spec.jobs.size(); ++j) add_job_nodes(j);
  link_rings();
  install_jobs();
}

// A node and its address, so that the book's id for the address is the node's id.
NodeId ClusterBuild::add(std::unique_ptr<Node> node, const runtime::Endpoint& address) {
  const NodeId id = sim_.add_node(std::move(node));
  if (book_.id_of(address) != id)
    throw std::logic_error("cluster: address book out of step with the simulator's nodes");
  return id;
}

void ClusterBuild::add_switch(const control::SwitchSpec& s) {
  auto node = std::make_unique<SwitchNode>(config_.switch_config(s.name), !spec_.trace_dir.empty());
  SwitchNode* raw = node.get();
  const NodeId id = add(std::move(node), s.address);
  raw->set_id(id);
  switches_[s.name] = {id, raw};
  switch_by_id_[id] = raw;
}

NodeId ClusterBuild::add_worker(std::size_t j, const engines::WorkerConfig& c,
                                std::uint32_t rank) {
  auto node = std::make_unique<TrainingWorkerNode>(collective(j, c, rank), spec_.jobs[j].plan,
                                                   rank, *verifiers_[j]);
  TrainingWorkerNode* raw = node.get();
  const std::uint32_t id_of_job = job_id(j);
  raw->on_finished([this, id_of_job] { control_->worker_finished(id_of_job); });
  const NodeId id = add(std::move(node), config_.jobs()[j].workers[rank].address);
  const bool first = j == 0 && rank == 0 && spec_.first_worker_link;
  sim_.connect(id, c.uplink, first ? *spec_.first_worker_link : spec_.host_link);
  route_to(id, c.uplink);
  if (!rings_[j].empty()) rings_[j].back()->set_self(id);
  workers_[j].push_back(raw);
  all_workers_.emplace_back(id, raw);
  return id;
}

// ATP's worker engine, or a ring member (linked to its successor once every worker exists).
std::unique_ptr<Collective> ClusterBuild::collective(std::size_t j, const engines::WorkerConfig& c,
                                                     std::uint32_t rank) {
  if (spec_.jobs[j].collective == CollectiveKind::atp) {
    if (!spec_.jobs[j].reduce_scatter) return std::make_unique<AtpCollective>(c);
    return std::make_unique<AtpCollective>(c, config_.rank_positions(job_id(j)), rank);
  }
  RingConfig ring;
  ring.rank = rank;
  ring.workers = c.job_workers;
  ring.values_per_packet = c.values_per_packet;
  ring.scale = c.scale;
  ring.window = c.window;
  ring.uplink = c.uplink;
  auto member = std::make_unique<RingAllreduce>(ring);
  rings_[j].push_back(member.get());
  return member;
}

// Every switch from the worker's rack up learns which neighbour leads down to it.
void ClusterBuild::route_to(NodeId worker, NodeId rack_switch) {
  NodeId below = worker;
  for (auto sw = switch_by_id_.find(rack_switch); sw != switch_by_id_.end();) {
    sw->second->add_route(worker, below);
    below = sw->first;
    auto up = uplink_of_.find(sw->first);
    if (up == uplink_of_.end()) break;
    sw = switch_by_id_.find(up->second);
  }
}

void ClusterBuild::link_rings() {
  for (std::size_t j = 0; j < rings_.size(); ++j)
    for (std::size_t r = 0; r < rings_[j].size(); ++r)
      rings_[j][r]->set_successor(rings_[j][(r + 1) % rings_[j].size()]->self());
}

// A parameter server on its own host, behind the switch that talks to its first job's PSs.
void ClusterBuild::add_server(const std::string& name, const std::string& top_switch) {
  auto node = std::make_unique<PsNode>();
  PsNode* raw = node.get();
  const NodeId id = add(std::move(node), config_.server_named(name).address);
  raw->set_id(id);
  servers_[name] = raw;
  sim_.connect(id, switches_.at(top_switch).first, spec_.host_link);
}

// The job's parameter servers not placed yet, then its workers.
void ClusterBuild::add_job_nodes(std::size_t j) {
  const control::JobConfig& job = config_.jobs()[j];
  for (const auto& name : job.parameter_servers)
    if (!servers_.count(name)) add_server(name, config_.top_switch(job.id));
  for (std::uint32_t rank = 0; rank < job.workers.size(); ++rank) {
    engines::WorkerConfig c = config_.worker_config(job.id, rank, book_, spec_.worker_defaults);
    // Each worker asks the job's first PS for its run, as a real launch does.
    c.run = std::nullopt;
    c.join_nonce = join_nonce(spec_.seed, job.id, rank);
    if (rank == 0)
      verifiers_.push_back(std::make_unique<JobVerifier>(spec_.jobs[j].gradients, job.id,
                                                         c.job_workers, c.values_per_packet,
                                                         c.scale));
    add_worker(j, c, rank);
  }
}

// The parameter servers get their entries now; the switch entries wait in the control
// plane's plan for each job's arrival. Each switch's entries are derived once, for all jobs.
void ClusterBuild::install_jobs() {
  for (std::size_t j = 0; j < spec_.jobs.size(); ++j)
    control_->plan(job_id(j), {spec_.jobs[j].plan.start, {}, workers_[j].size(),
                               lendable_home(j), config_.jobs()[j].window});
  if (spec_.lend_idle_homes)
    control_->on_rehome([this](std::uint32_t job, const engines::HomeSlice& home) {
      rehome(job, home);
    });
  for (const auto& [name, sw] : switches_)
    for (const engines::SwitchJob& entry : config_.switch_jobs(name, book_))
      control_->add_entry(entry.job, sw.second, entry);
  for (const auto& [name, server] : servers_)
    for (engines::PsJob entry : config_.server_jobs(name, book_)) {
      entry.first_run = static_cast<std::uint16_t>(entry.token >> 16);  // a launch's draw
      server->ps().add_job(entry);
    }
}

// A job's home, if it plans on one that lending may grow: planned placement of an ATP job
// whose every switch aggregates by the aggregator its fragments name. A job whose PSs borrow
// (opt-in) finds idle aggregators its own way and keeps its home.
std::optional<engines::HomeSlice> ClusterBuild::lendable_home(std::size_t j) const {
  const JobSpec& job = spec_.jobs[j];
  if (job.collective != CollectiveKind::atp || job.placement != engines::Placement::planned ||
      job.borrow_aggregators)
    return std::nullopt;
  for (const auto& [name, sw] : switches_)
    if (sw.second->pipeline().config().policy == engines::Policy::static_partition)
      return std::nullopt;
  const engines::HomeSlice home = config_.home_of(config_.jobs()[j]);
  if (home.count == 0) return std::nullopt;
  return home;
}

// What the controller would send the job's PSs and workers.
void ClusterBuild::rehome(std::uint32_t job, const engines::HomeSlice& home) {
  for (std::size_t j = 0; j < spec_.jobs.size(); ++j) {
    if (job_id(j) != job) continue;
    for (const auto& name : config_.jobs()[j].parameter_servers)
      servers_.at(name)->ps().set_home(job, home);
    for (TrainingWorkerNode* w : workers_[j]) w->collective().set_home(home);
  }
}

void ClusterBuild::run() {
  control_->start(sim_, control_id_);  // before the workers: a job's entries precede its packets
  for (auto& [id, node] : all_workers_) node->start(sim_, id);
  if (spec_.sample_every > 0)
    run_sampling();
  else
    sim_.run(spec_.time_limit);
  if (!spec_.trace_dir.empty()) write_traces();
}

// The run in steps of sample_every, each job's counters read between them.
void ClusterBuild::run_sampling() {
  std::vector<JobInterval> before(spec_.jobs.size());
  for (Time end = spec_.sample_every; !sim_.idle() && end - spec_.sample_every < spec_.time_limit;
       end += spec_.sample_every) {
    sim_.run(std::min(end, spec_.time_limit));
    SeriesSample sample{end, {}};
    for (std::size_t j = 0; j < spec_.jobs.size(); ++j) {
      const JobInterval now = job_totals(j);
      sample.jobs.push_back({now.in_network - before[j].in_network, now.at_ps - before[j].at_ps,
                             now.collisions - before[j].collisions});
      before[j] = now;
    }
    series_.push_back(std::move(sample));
  }
}

engines::PsJobCounters ClusterBuild::ps_counters(std::size_t j) const {
  engines::PsJobCounters ps;
  for (const auto& name : config_.jobs()[j].parameter_servers)
    if (const auto* c = servers_.at(name)->ps().job_counters(job_id(j))) engines::add_counters(ps, *c);
  return ps;
}

JobInterval ClusterBuild::job_totals(std::size_t j) const {
  const engines::PsJobCounters ps = ps_counters(j);
  return {ps.completed_in_network, ps.completed - ps.completed_in_network,
          control_->switch_counters(job_id(j)).collisions};
}

void ClusterBuild::run_control_plane_until(Time when) {
  control_->start(sim_, control_id_);
  sim_.run(when);
}

void ClusterBuild::write_traces() const {
  for (const auto& [name, sw] : switches_)
    conformance::write_trace_file(spec_.trace_dir + "/" + name + ".jsonl", sw.second->trace());
}

JobReport ClusterBuild::job_report(std::size_t j) const {
  const JobSpec& job = spec_.jobs[j];
  const std::uint32_t id = job_id(j);
  JobReport r;
  r.job = id;
  r.iterations = job.plan.iterations;
  r.start = job.plan.start;
  r.samples_per_iteration = job.plan.samples_per_iteration;
  r.model_scale = job.plan.model_scale;
  for (std::size_t size : job.plan.tensor_sizes) r.tensor_bytes += size * 4;
  r.tensor_bytes *= job.plan.iterations;
  r.finished = true;
  Duration communication = 0, first = 0;
  for (const TrainingWorkerNode* w : workers_[j]) {
    r.finished &= w->finished();
    if (w->failed() && r.error.empty()) r.error = w->collective().error();
    r.completion_time = std::max(r.completion_time, w->finish_time());
    r.first_iteration_end = std::max(r.first_iteration_end, w->first_iteration_end());
    communication += w->communication_time();
    first += w->first_allreduce_time();
    engines::add_counters(r.workers, w->collective().stats());
  }
  r.communication_time = communication / static_cast<Duration>(workers_[j].size());
  r.first_allreduce_time = first / static_cast<Duration>(workers_[j].size());
  r.switches = control_->switch_counters(id);
  r.static_first = control_->static_first(id);
  r.departed = control_->departed(id);
  r.ps = ps_counters(j);
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
  report.series = series_;
  for (const auto& [name, sw] : switches_)
    engines::add_counters(report.switches, sw.second->pipeline().counters());
  for (std::size_t j = 0; j < spec_.jobs.size(); ++j) report.jobs.push_back(job_report(j));
  return report;
}

// What each node holds, its node ids as addresses.
InstalledEntries ClusterBuild::installed() const {
  InstalledEntries out;
  auto to_addresses = [&](const std::vector<engines::Port>& ids) {
    std::vector<runtime::Endpoint> e;
    for (engines::Port id : ids) e.push_back(book_.endpoint(id));
    return e;
  };
  for (const auto& [name, sw] : switches_)
    for (std::uint32_t id : sw.second->pipeline().jobs()) {
      const engines::SwitchJob& job = *sw.second->pipeline().job(id);
      out.switches[name].push_back(
          {job, to_addresses(job.downstream), to_addresses(job.upstream)});
    }
  for (const auto& [name, server] : servers_)
    for (std::uint32_t id : server->ps().jobs()) {
      const engines::PsJob& job = *server->ps().job(id);
      out.servers[name].push_back({job, book_.endpoint(job.downstream)});
    }
  return out;
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

InstalledEntries installed_at(const ClusterSpec& spec, Time when) {
  validate(spec);
  Simulator sim(spec.seed);
  ClusterBuild cluster(spec, sim);
  cluster.run_control_plane_until(when);  // it installs each job's switch entries at arrival
  return cluster.installed();
}

}  // namespace atp::sim
