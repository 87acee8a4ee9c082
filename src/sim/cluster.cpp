#include "sim/cluster.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "quant/quantizer.h"
#include "sim/control_plane_node.h"
#include "sim/rng.h"

namespace atp::sim {

namespace {

std::vector<engines::Port> ports_of(const std::vector<NodeId>& nodes) {
  std::vector<engines::Port> ports;
  for (NodeId n : nodes) ports.push_back(engines::port_of_node(n));
  return ports;
}

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
// installs each job's switch entries while the run goes on.
class ClusterBuild {
 public:
  ClusterBuild(const ClusterSpec& spec, Simulator& sim);
  void add_job(std::uint32_t j);
  void run();
  ClusterReport report() const;

 private:
  struct JobShape {  // the racks a job uses, in job rack order
    std::vector<std::size_t> racks;
    std::vector<std::uint8_t> counts;
    std::uint16_t workers = 0;
  };
  std::pair<NodeId, SwitchNode*> add_switch(proto::Level level, std::uint16_t width);
  std::pair<NodeId, PsNode*> add_server();
  NodeId add_worker(std::uint32_t j, const engines::WorkerConfig& c, std::uint32_t rank);
  JobReport job_report(std::uint32_t j) const;
  void write_traces() const;

  const ClusterSpec& spec_;
  Simulator& sim_;
  ControlPlaneNode* control_ = nullptr;
  NodeId control_id_ = 0;
  std::vector<std::pair<NodeId, SwitchNode*>> rack_switches_;
  std::pair<NodeId, SwitchNode*> spine_;
  std::vector<std::pair<NodeId, PsNode*>> servers_;
  std::vector<std::unique_ptr<JobVerifier>> verifiers_;
  std::vector<std::vector<TrainingWorkerNode*>> workers_;
  std::vector<std::pair<NodeId, TrainingWorkerNode*>> all_workers_;
};

ClusterBuild::ClusterBuild(const ClusterSpec& spec, Simulator& sim)
    : spec_(spec), sim_(sim), workers_(spec.jobs.size()) {
  auto control = std::make_unique<ControlPlaneNode>();
  control_ = control.get();
  control_id_ = sim_.add_node(std::move(control));
  std::size_t racks = 0;
  std::uint16_t width = 1;
  for (const JobSpec& job : spec.jobs) {
    racks = std::max(racks, job.workers_per_rack.size());
    width = std::max(width, job.values_per_packet);
  }
  for (std::size_t r = 0; r < racks; ++r)
    rack_switches_.push_back(add_switch(proto::Level::rack, width));
  spine_ = add_switch(proto::Level::spine, width);
  for (const auto& [id, node] : rack_switches_) sim_.connect(id, spine_.first, spec.core_link);
}

std::pair<NodeId, SwitchNode*> ClusterBuild::add_switch(proto::Level level, std::uint16_t width) {
  auto node = std::make_unique<SwitchNode>(
      engines::SwitchConfig{level, spec_.pool_size, width, spec_.policy}, !spec_.trace_dir.empty());
  SwitchNode* raw = node.get();
  const NodeId id = sim_.add_node(std::move(node));
  raw->set_id(id);
  return {id, raw};
}

// Every job has its own parameter servers, each on its own host behind the PS-rack switch.
std::pair<NodeId, PsNode*> ClusterBuild::add_server() {
  auto node = std::make_unique<PsNode>();
  PsNode* raw = node.get();
  const NodeId id = sim_.add_node(std::move(node));
  raw->set_id(id);
  servers_.emplace_back(id, raw);
  sim_.connect(id, spine_.first, spec_.host_link);
  return {id, raw};
}

NodeId ClusterBuild::add_worker(std::uint32_t j, const engines::WorkerConfig& c,
                                std::uint32_t rank) {
  auto node = std::make_unique<TrainingWorkerNode>(c, spec_.jobs[j].plan, rank, *verifiers_[j]);
  TrainingWorkerNode* raw = node.get();
  raw->on_finished([this, j] { control_->worker_finished(j); });
  const NodeId id = sim_.add_node(std::move(node));
  sim_.connect(id, c.uplink, spec_.host_link);
  workers_[j].push_back(raw);
  all_workers_.emplace_back(id, raw);
  return id;
}

void ClusterBuild::add_job(std::uint32_t j) {
  const JobSpec& job = spec_.jobs[j];
  JobShape shape;
  for (std::size_t r = 0; r < job.workers_per_rack.size(); ++r) {
    if (job.workers_per_rack[r] == 0) continue;
    shape.racks.push_back(r);
    shape.counts.push_back(job.workers_per_rack[r]);
    shape.workers = static_cast<std::uint16_t>(shape.workers + job.workers_per_rack[r]);
  }
  const float scale =
      job.scale > 0 ? job.scale : quant::choose_scale(job.gradients.magnitude, shape.workers);
  std::uint64_t token_seed = spec_.seed ^ (std::uint64_t{j} << 32);
  const auto token = static_cast<std::uint32_t>(splitmix64(token_seed));
  verifiers_.push_back(std::make_unique<JobVerifier>(job.gradients, j, shape.workers,
                                                     job.values_per_packet, scale));
  std::vector<NodeId> server_ids;
  for (unsigned p = 0; p < spec_.parameter_servers; ++p) server_ids.push_back(add_server().first);

  // Static slices: an equal share of the pool each, allocated when the job arrives.
  const std::uint32_t slice = spec_.pool_size / static_cast<std::uint32_t>(spec_.jobs.size());
  const auto group = engines::multicast_group_of_job(j);
  ControlPlaneNode::JobPlan plan{job.plan.start, {}, shape.workers};
  std::vector<NodeId> rack_switches_of_job;
  std::uint32_t rank = 0;
  for (std::size_t jr = 0; jr < shape.racks.size(); ++jr) {
    const auto [switch_id, rack_switch] = rack_switches_[shape.racks[jr]];
    rack_switches_of_job.push_back(switch_id);
    std::vector<NodeId> members;
    for (std::uint8_t w = 0; w < shape.counts[jr]; ++w) {
      engines::WorkerConfig c = spec_.worker_defaults;
      c.job = j;
      c.rack = static_cast<std::uint8_t>(jr);
      c.rank_in_rack = w;
      c.rack_fan_in = shape.counts[jr];
      c.job_fan_in = static_cast<std::uint8_t>(shape.racks.size());
      c.job_workers = shape.workers;
      c.values_per_packet = job.values_per_packet;
      c.window = job.window;
      c.scale = scale;
      c.parameter_servers = spec_.parameter_servers;
      c.uplink = switch_id;
      c.token = token;
      // Each worker asks the job's first PS for its run, as a real launch does.
      c.run = std::nullopt;
      c.join_nonce = static_cast<std::uint32_t>(splitmix64(token_seed)) | 1u;
      members.push_back(add_worker(j, c, rank++));
    }
    plan.entries.emplace_back(rack_switch, engines::SwitchJob{
        j, ports_of(members), {engines::port_of_node(spine_.first)}, job.window, 0, slice,
        shape.counts[jr], token, group});
  }
  plan.entries.emplace_back(spine_.second, engines::SwitchJob{
      j, ports_of(rack_switches_of_job), ports_of(server_ids), job.window, 0, slice,
      static_cast<std::uint8_t>(shape.racks.size()), token, group});
  control_->plan(j, std::move(plan));
  for (std::size_t p = 0; p < server_ids.size(); ++p)
    servers_[servers_.size() - server_ids.size() + p].second->ps().add_job(engines::PsJob{
        j, shape.counts, job.window, job.values_per_packet, spine_.first,
        static_cast<std::uint8_t>(p), spec_.pool_size, token,
        static_cast<std::uint16_t>(token >> 16)});
}

void ClusterBuild::run() {
  control_->start(sim_, control_id_);  // before the workers: a job's entries precede its packets
  for (auto& [id, node] : all_workers_) node->start(sim_, id);
  sim_.run(spec_.time_limit);
  if (!spec_.trace_dir.empty()) write_traces();
}

void ClusterBuild::write_traces() const {
  for (std::size_t r = 0; r < rack_switches_.size(); ++r)
    conformance::write_trace_file(spec_.trace_dir + "/rack" + std::to_string(r) + ".jsonl",
                                  rack_switches_[r].second->trace());
  conformance::write_trace_file(spec_.trace_dir + "/spine.jsonl", spine_.second->trace());
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
  for (const auto& [id, s] : servers_)
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
  for (std::uint32_t j = 0; j < spec.jobs.size(); ++j) cluster.add_job(j);
  cluster.run();
  return cluster.report();
}

}  // namespace atp::sim
