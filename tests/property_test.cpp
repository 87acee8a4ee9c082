// Property: on any cluster, under any mix of loss, reordering and duplication, with any pool
// size and policy, every job completes and every result of every worker is exact.
// A failure prints the seed and the `atp sim` command that replays it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "sim/cluster.h"
#include "workload/rng.h"
#include "sim/scenario.h"

namespace atp::sim {
namespace {

Scenario random_scenario(std::uint64_t seed) {
  workload::Rng rng(seed * 0x9E3779B97F4A7C15ull + 17);
  Scenario s;
  s.seed = seed;
  s.racks = 1 + static_cast<unsigned>(rng.below(2));
  // Fan-in from 1 to 32 per rack, biased toward small jobs to keep the suite fast.
  const unsigned fan_in_choices[] = {1, 2, 3, 4, 5, 8, 16, 32};
  s.workers_per_rack = fan_in_choices[rng.below(8)];
  const unsigned max_jobs = s.workers_per_rack >= 16 ? 2 : 8;
  s.jobs = 1 + static_cast<unsigned>(rng.below(max_jobs));
  const std::uint32_t pools[] = {1, 2, 8, 32, 1024};
  s.aggregators = pools[rng.below(5)];
  s.window = 1u << (1 + rng.below(6));  // 2..64
  const std::uint16_t ks[] = {1, 7, 64, 256};
  s.values_per_packet = ks[rng.below(4)];
  s.tensor_bytes = 4 * (1 + rng.below(3000));
  s.iterations = 1 + static_cast<std::uint32_t>(rng.below(3));
  s.loss = rng.chance(0.7) ? rng.uniform() * 0.10 : 0;
  s.reorder = rng.chance(0.5) ? rng.uniform() * 0.2 : 0;
  s.duplicate = rng.chance(0.5) ? rng.uniform() * 0.1 : 0;
  const char* policies[] = {"atp", "static", "none"};
  s.policy = policies[rng.below(3)];
  s.parameter_servers = 1 + static_cast<unsigned>(rng.below(2));
  s.overflow_fraction = rng.chance(0.2) ? 0.001 : 0;
  // Simulated seconds, cheap to give: 8 jobs of K = 1 over six links losing 10% each take
  // about 130 s to finish (seed 485), slowly but exactly.
  s.time_limit_s = 600;
  // Drawn last so the draws above stay what they were for every seed: sometimes a ring of
  // one, two or four windows instead of the default sixteen.
  if (rng.chance(0.3)) s.ring = s.window << rng.below(3);
  // Then, sometimes: the collision-driven aggregator window, and a model's buckets ready
  // during the backward pass instead of one tensor, scaled down 2^16-2^18 (at most about
  // 2,100 values per iteration, no more than the single tensors above; microseconds of
  // compute).
  s.aggregator_window = rng.chance(0.3);
  if (rng.chance(0.25)) {
    static const char* models[] = {"resnet50", "vgg16", "bert-base"};
    s.models = {models[rng.below(3)]};
    s.model_scale = static_cast<double>(1u << (16 + rng.below(3)));
  }
  // And sometimes jobs arriving apart, so homes are lent and handed back while the faults
  // above hit the packets (control/home_lending.h).
  if (rng.chance(0.3)) s.arrival_gap_us = rng.uniform() * 3000;
  return s;
}

TEST(Property, EveryJobCompletesExactlyUnderRandomFaults) {
  const char* env = std::getenv("ATP_PROPERTY_SEEDS");
  const std::uint64_t seeds = env ? std::strtoull(env, nullptr, 10) : 150;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const Scenario s = random_scenario(seed);
    const ClusterReport r = run_cluster(to_cluster_spec(s));
    for (const JobReport& j : r.jobs) {
      ASSERT_TRUE(j.exact) << "seed " << seed << ": job " << j.job
                           << (j.finished ? " finished with wrong results" : " did not finish")
                           << " (mismatches " << j.mismatches << ", checked "
                           << j.results_checked << ") " << j.error
                           << "\nreproduce: build/bin/" << s.command_line();
    }
  }
}

}  // namespace
}  // namespace atp::sim
