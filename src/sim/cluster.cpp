#include "sim/cluster.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "quant/quantizer.h"
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

ClusterReport run_cluster(const ClusterSpec& spec, const Simulator::DropFilter& drop_filter) {
  validate(spec);
  Simulator sim(spec.seed);
  sim.set_drop_filter(drop_filter);

  std::size_t racks = 0;
  std::uint16_t width = 1;
  for (const JobSpec& job : spec.jobs) {
    racks = std::max(racks, job.workers_per_rack.size());
    width = std::max(width, job.values_per_packet);
  }

  auto add_switch = [&](proto::Level level) {
    auto node = std::make_unique<SwitchNode>(
        engines::SwitchConfig{level, spec.pool_size, width, spec.policy}, !spec.trace_dir.empty());
    SwitchNode* raw = node.get();
    const NodeId id = sim.add_node(std::move(node));
    raw->set_id(id);
    return std::make_pair(id, raw);
  };
  std::vector<std::pair<NodeId, SwitchNode*>> rack_switches;
  for (std::size_t r = 0; r < racks; ++r) rack_switches.push_back(add_switch(proto::Level::rack));
  const auto spine_pair = add_switch(proto::Level::spine);  // no structured binding: a lambda uses it
  const NodeId spine_id = spine_pair.first;
  SwitchNode* const spine = spine_pair.second;
  for (const auto& [id, node] : rack_switches) sim.connect(id, spine_id, spec.core_link);

  // Every job has its own parameter servers, each on its own host behind the PS-rack switch.
  std::vector<std::pair<NodeId, PsNode*>> servers;
  auto add_server = [&] {
    auto node = std::make_unique<PsNode>();
    PsNode* raw = node.get();
    const NodeId id = sim.add_node(std::move(node));
    raw->set_id(id);
    servers.emplace_back(id, raw);
    sim.connect(id, spine_id, spec.host_link);
    return std::make_pair(id, raw);
  };

  std::vector<std::unique_ptr<JobVerifier>> verifiers;
  std::vector<std::vector<TrainingWorkerNode*>> workers(spec.jobs.size());
  std::vector<std::pair<NodeId, TrainingWorkerNode*>> all_workers;
  const auto jobs = static_cast<std::uint32_t>(spec.jobs.size());
  const std::uint32_t slice = spec.pool_size / jobs;

  for (std::uint32_t j = 0; j < jobs; ++j) {
    const JobSpec& job = spec.jobs[j];
    std::vector<std::uint8_t> used_counts;
    std::vector<std::size_t> used_racks;
    std::uint16_t total = 0;
    for (std::size_t r = 0; r < job.workers_per_rack.size(); ++r) {
      if (job.workers_per_rack[r] == 0) continue;
      used_racks.push_back(r);
      used_counts.push_back(job.workers_per_rack[r]);
      total = static_cast<std::uint16_t>(total + job.workers_per_rack[r]);
    }
    const float scale =
        job.scale > 0 ? job.scale : quant::choose_scale(job.gradients.magnitude, total);
    std::uint64_t token_seed = spec.seed ^ (std::uint64_t{j} << 32);
    const auto token = static_cast<std::uint32_t>(splitmix64(token_seed));
    verifiers.push_back(
        std::make_unique<JobVerifier>(job.gradients, j, total, job.values_per_packet, scale));

    std::vector<std::pair<NodeId, PsNode*>> job_servers;
    for (unsigned p = 0; p < spec.parameter_servers; ++p) job_servers.push_back(add_server());
    std::vector<NodeId> server_ids;
    for (const auto& server : job_servers) server_ids.push_back(server.first);

    std::vector<NodeId> rack_switches_of_job;
    std::uint32_t rank = 0;
    for (std::size_t jr = 0; jr < used_racks.size(); ++jr) {
      const auto [switch_id, rack_switch] = rack_switches[used_racks[jr]];
      rack_switches_of_job.push_back(switch_id);
      std::vector<NodeId> members;
      for (std::uint8_t w = 0; w < used_counts[jr]; ++w) {
        engines::WorkerConfig c = spec.worker_defaults;
        c.job = j;
        c.rack = static_cast<std::uint8_t>(jr);
        c.rank_in_rack = w;
        c.rack_fan_in = used_counts[jr];
        c.job_fan_in = static_cast<std::uint8_t>(used_racks.size());
        c.job_workers = total;
        c.values_per_packet = job.values_per_packet;
        c.window = job.window;
        c.scale = scale;
        c.parameter_servers = spec.parameter_servers;
        c.uplink = switch_id;
        c.token = token;
        // Each worker asks the job's first PS for its run, as a real launch does.
        c.run = std::nullopt;
        c.join_nonce = static_cast<std::uint32_t>(splitmix64(token_seed)) | 1u;
        auto node = std::make_unique<TrainingWorkerNode>(c, job.plan, rank++, *verifiers.back());
        TrainingWorkerNode* raw = node.get();
        const NodeId id = sim.add_node(std::move(node));
        sim.connect(id, switch_id, spec.host_link);
        members.push_back(id);
        workers[j].push_back(raw);
        all_workers.emplace_back(id, raw);
      }
      rack_switch->add_job(engines::SwitchJob{
          j, ports_of(members), {engines::port_of_node(spine_id)}, job.window, j * slice, slice,
          used_counts[jr], token, engines::multicast_group_of_job(j)});
    }
    spine->add_job(engines::SwitchJob{
        j, ports_of(rack_switches_of_job), ports_of(server_ids), job.window, j * slice, slice,
        static_cast<std::uint8_t>(used_racks.size()), token, engines::multicast_group_of_job(j)});
    for (unsigned p = 0; p < job_servers.size(); ++p)
      job_servers[p].second->ps().add_job(engines::PsJob{j, used_counts, job.window,
                                                     job.values_per_packet, spine_id,
                                                     static_cast<std::uint8_t>(p),
                                                     spec.pool_size, token,
                                                     static_cast<std::uint16_t>(token >> 16)});
  }

  for (auto& [id, node] : all_workers) node->start(sim, id);
  sim.run(spec.time_limit);
  if (!spec.trace_dir.empty()) {
    for (std::size_t r = 0; r < rack_switches.size(); ++r)
      conformance::write_trace_file(spec.trace_dir + "/rack" + std::to_string(r) + ".jsonl",
                                    rack_switches[r].second->trace());
    conformance::write_trace_file(spec.trace_dir + "/spine.jsonl", spine->trace());
  }

  ClusterReport report;
  report.events = sim.events();
  report.trace_hash = sim.trace_hash();
  report.end_time = sim.now();
  report.links = sim.link_totals();
  for (const auto& [id, s] : rack_switches) engines::add_counters(report.switches, s->pipeline().counters());
  engines::add_counters(report.switches, spine->pipeline().counters());
  for (std::uint32_t j = 0; j < jobs; ++j) {
    const JobSpec& spec_j = spec.jobs[j];
    JobReport r;
    r.job = j;
    r.iterations = spec_j.plan.iterations;
    for (std::size_t size : spec_j.plan.tensor_sizes) r.tensor_bytes += size * 4;
    r.tensor_bytes *= spec_j.plan.iterations;
    r.finished = true;
    Duration communication = 0;
    for (const TrainingWorkerNode* w : workers[j]) {
      r.finished &= w->finished();
      if (w->failed() && r.error.empty()) r.error = w->worker().error();
      r.completion_time = std::max(r.completion_time, w->finish_time());
      communication += w->communication_time();
      engines::add_counters(r.workers, w->worker().stats());
    }
    r.communication_time = communication / static_cast<Duration>(workers[j].size());
    for (const auto& [id, s] : rack_switches)
      if (const auto* c = s->pipeline().job_counters(j)) engines::add_counters(r.switches, *c);
    if (const auto* c = spine->pipeline().job_counters(j)) engines::add_counters(r.switches, *c);
    for (const auto& [id, s] : servers)
      if (const auto* c = s->ps().job_counters(j)) engines::add_counters(r.ps, *c);
    r.results_checked = verifiers[j]->checked();
    r.mismatches = verifiers[j]->mismatches();
    const std::uint64_t expected_checks =
        std::uint64_t{workers[j].size()} * spec_j.plan.iterations * spec_j.plan.tensor_sizes.size();
    r.exact = r.finished && r.mismatches == 0 && r.results_checked == expected_checks;
    r.fraction_in_network =
        r.ps.completed ? static_cast<double>(r.ps.completed_in_network) / r.ps.completed : 0;
    report.jobs.push_back(r);
  }
  return report;
}

}  // namespace atp::sim
