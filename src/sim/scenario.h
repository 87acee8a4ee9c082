#pragma once
// A simulation scenario in the terms `atp sim` takes on its command line, and how it becomes a
// cluster: every job gets `workers_per_rack` workers in each of `racks` racks.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster.h"

namespace atp::sim {

// The --model entry of a job that runs --tensor-bytes (or --layers) and --compute-us.
inline constexpr const char* kSyntheticJob = "synthetic";

struct Scenario {
  // A cluster file (docs/configuration.md): its switches, parameter servers and jobs replace
  // racks, workers_per_rack, jobs, aggregators, window, values_per_packet, policy and
  // parameter_servers; every job of the file runs the tensors, iterations and compute below.
  std::string cluster_file;
  unsigned racks = 1;
  unsigned workers_per_rack = 4;
  unsigned jobs = 1;
  std::uint32_t aggregators = 1024;
  std::uint32_t window = 64;
  std::uint32_t ring = 0;  // seqs each worker tracks at once; 0: ring_or_default
  bool aggregator_window = false;  // workers add the collision-driven window (A2TP-style)
  bool borrow_aggregators = false;  // PSs borrow other jobs' idle home aggregators
  bool keep_homes = false;  // no lending of absent jobs' homes (ClusterSpec::lend_idle_homes)
  std::string placement = "planned";  // planned, hash or linear (engines::Placement)
  bool no_congestion_control = false;  // workers keep their windows at the ceiling
  bool rack_only = false;  // the PS rack's switch does not aggregate
  std::uint16_t values_per_packet = 256;
  std::uint64_t tensor_bytes = 1 << 20;
  // Per-layer tensors (bytes each), allreduced one after another each iteration; when set,
  // it replaces tensor_bytes.
  std::vector<std::uint64_t> layer_bytes;
  std::uint32_t iterations = 3;
  double compute_us = 0;
  // Model workloads (workload/models.h): job j trains models[j mod size], its buckets and
  // compute time replacing tensor_bytes, layer_bytes and compute_us; a job whose entry is
  // kSyntheticJob runs those instead, so one scenario can mix both.
  std::vector<std::string> models;
  double model_scale = 64;  // divides every model's bytes and compute time alike
  std::string gpu = "a100";
  std::uint64_t bucket_bytes = 25 << 20;  // DDP's bucket_cap_mb
  bool no_overlap = false;  // every bucket waits for the whole backward pass
  // atp, or ring: the host-only ring allreduce baseline on the same links.
  std::string collective = "atp";
  bool reduce_scatter = false;  // ATP: every tensor reduce-scattered, not allreduced
  double link_gbps = 100;
  double core_gbps = 0;  // switch-to-switch links; 0: link_gbps
  double delay_us = 1;
  // Wire bytes per packet beyond the ATP packet (Ethernet, IP, UDP, FCS, preamble, gap: 66).
  unsigned frame_bytes = 0;
  double loss = 0;
  // Loss on the first job's first worker's link only, both ways (on top of `loss`).
  double loss_one_worker = 0;
  double reorder = 0;
  double duplicate = 0;
  std::uint64_t ecn_threshold = 256 << 10;  // bytes queued
  std::string policy = "atp";
  unsigned parameter_servers = 1;
  double overflow_fraction = 0;  // share of gradient values too large for int32
  double min_rto_us = 0;  // 0: from the path (see to_cluster_spec)
  // Job j arrives j x this late (its switch entries are installed then); every job leaves
  // when its last worker is done.
  double arrival_gap_us = 0;
  double time_limit_s = 60;
  std::uint64_t seed = 1;

  // The `atp sim ...` command line that runs this scenario.
  std::string command_line() const;

 private:
  std::string model_options() const;
};

// Throws std::invalid_argument with a message naming the bad option.
ClusterSpec to_cluster_spec(const Scenario& s);

}  // namespace atp::sim
