#include "sim/cluster_description.h"

#include <algorithm>

#include "workload/rng.h"

namespace atp::sim {

namespace {

// 10.kind.(index >> 8).(index & 255), port 9999 (workers: 10000 + rank).
runtime::Endpoint address(std::uint32_t kind, std::uint32_t index, std::uint16_t port = 9999) {
  return {(10u << 24) | (kind << 16) | (index & 0xFFFFu), port};
}

}  // namespace

std::string rack_name(std::size_t rack) { return "rack" + std::to_string(rack); }
std::string server_name(std::uint32_t job, unsigned shard) {
  return "ps" + std::to_string(job) + "-" + std::to_string(shard);
}

runtime::Endpoint rack_address(std::size_t rack) {
  return address(1, static_cast<std::uint32_t>(rack));
}
runtime::Endpoint spine_address() { return address(2, 0); }
runtime::Endpoint server_address(std::uint32_t job, unsigned shard) {
  return address(3, job, static_cast<std::uint16_t>(9999 - shard));
}
runtime::Endpoint worker_address(std::uint32_t job, std::uint32_t rank) {
  return address(4, job, static_cast<std::uint16_t>(10000 + rank));
}
runtime::Endpoint control_address() { return address(9, 0); }

namespace {
std::uint64_t launch_draw(std::uint64_t seed, std::uint32_t job, std::uint32_t n) {
  std::uint64_t state = seed ^ (std::uint64_t{job} << 32);
  std::uint64_t draw = workload::splitmix64(state);
  for (std::uint32_t i = 0; i < n; ++i) draw = workload::splitmix64(state);
  return draw;
}
}  // namespace

std::uint32_t job_token(std::uint64_t seed, std::uint32_t job) {
  return static_cast<std::uint32_t>(launch_draw(seed, job, 0));
}

std::uint32_t join_nonce(std::uint64_t seed, std::uint32_t job, std::uint32_t rank) {
  return static_cast<std::uint32_t>(launch_draw(seed, job, rank + 1)) | 1u;
}

control::ClusterConfig describe(const ClusterSpec& spec) {
  std::size_t racks = 0;
  std::uint16_t width = 1;
  for (const JobSpec& job : spec.jobs) {
    racks = std::max(racks, job.workers_per_rack.size());
    width = std::max(width, job.values_per_packet);
  }
  std::vector<control::SwitchSpec> switches;
  for (std::size_t r = 0; r <= racks; ++r) {
    control::SwitchSpec s;
    const bool spine = r == racks;
    s.name = spine ? kSpineName : rack_name(r);
    s.address = spine ? spine_address() : rack_address(r);
    s.level = spine ? proto::Level::spine : proto::Level::rack;
    s.aggregators = spec.pool_size;
    s.values_per_aggregator = width;
    s.policy = spine && !spec.spine_aggregates ? engines::Policy::none : spec.policy;
    s.uplink = spine ? "" : kSpineName;
    switches.push_back(s);
  }
  std::vector<control::ServerSpec> servers;
  std::vector<control::JobConfig> jobs;
  for (std::uint32_t j = 0; j < spec.jobs.size(); ++j) {
    const JobSpec& job = spec.jobs[j];
    control::JobConfig c;
    c.id = j;
    c.window = job.window;
    c.ring = job.ring;
    // A scenario's workers start as a cluster file's jobs do, at its initial_window (16) with
    // slow start: what users run. Starting every worker of every job at the full window was an
    // incast of its own at each launch (random scenarios, issue 48, seed 1043: seven jobs of
    // 39 workers at windows of 256 on a 2:1 core, lossless, 0.49 Gbit/s per job with 1.8 x
    // 10^5 resends; 3.31 with slow start from 16).
    c.aggregator_window = job.aggregator_window;
    c.borrow_aggregators = job.borrow_aggregators;
    c.placement = job.placement;
    c.congestion_control = job.congestion_control;
    c.values_per_packet = job.values_per_packet;
    c.scale = job.scale;
    c.max_gradient = job.gradients.magnitude;
    c.deadline = spec.worker_defaults.deadline;
    c.token = job_token(spec.seed, j);
    for (unsigned p = 0; p < spec.parameter_servers; ++p) {
      servers.push_back({server_name(j, p), server_address(j, p), {}});
      c.parameter_servers.push_back(server_name(j, p));
    }
    std::uint32_t rank = 0;
    for (std::size_t r = 0; r < job.workers_per_rack.size(); ++r)
      for (std::uint8_t w = 0; w < job.workers_per_rack[r]; ++w)
        c.workers.push_back({rack_name(r), worker_address(j, rank++)});
    jobs.push_back(std::move(c));
  }
  return control::ClusterConfig::from_parts(std::move(switches), std::move(servers),
                                            std::move(jobs), "simulated cluster");
}

}  // namespace atp::sim
