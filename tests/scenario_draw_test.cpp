// The random-scenario generator (sim/scenario_draw.h): every draw inside the space issue 48
// names and within the run budget, the same seed the same scenario, the baselines differing
// from the draw in their one term only, and a small subset of drawn scenarios run exactly
// (the whole sweep is scripts/scenario-sweep.py, a benchmark).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "sim/cluster.h"
#include "sim/scenario_draw.h"
#include "workload/models.h"

namespace atp::sim {
namespace {

bool is_power_of_two(std::uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

void expect_in_space(const DrawnScenario& d) {
  const Scenario& s = d.scenario;
  SCOPED_TRACE(s.command_line());
  EXPECT_GE(s.racks, 1u);
  EXPECT_LE(s.racks, 4u);
  EXPECT_GE(s.workers_per_rack, 2u);
  EXPECT_LE(s.workers_per_rack, 16u);
  EXPECT_GE(s.jobs, 1u);
  EXPECT_LE(s.jobs, 8u);
  EXPECT_EQ(s.models.size(), s.jobs);
  EXPECT_GE(s.link_gbps, 10);
  EXPECT_LE(s.link_gbps, 100);
  EXPECT_GE(s.core_gbps, s.link_gbps);
  EXPECT_GE(s.delay_us, 1);
  EXPECT_LE(s.delay_us, 20);
  EXPECT_TRUE(s.values_per_packet == 64 || s.values_per_packet == 128 ||
              s.values_per_packet == 256);
  EXPECT_TRUE(is_power_of_two(s.window) && s.window >= 16 && s.window <= 256);
  // Rounded to whole aggregators.
  EXPECT_GE(d.pool_share, 0.25 - 1.0 / (s.jobs * s.window));
  EXPECT_LE(d.pool_share, 1.0);
  EXPECT_GE(s.parameter_servers, 1u);
  EXPECT_LE(s.parameter_servers, 8u);
  EXPECT_TRUE(d.loss == 0 || (d.loss >= 0.0001 && d.loss <= 0.05));
  EXPECT_EQ(s.loss + s.loss_one_worker, d.loss);
  EXPECT_EQ(s.loss_one_worker > 0, d.loss_on_one_worker);
  EXPECT_LE(s.arrival_gap_us, 5000);
  EXPECT_GE(s.model_scale, 64);
  EXPECT_EQ(s.policy, "atp");
  EXPECT_EQ(s.placement, "planned");
  EXPECT_NO_THROW(to_cluster_spec(s));
}

// Fragments the scenario sends, from the plans the cluster will run.
double fragments(const Scenario& s) {
  const ClusterSpec spec = to_cluster_spec(s);
  double total = 0;
  for (const JobSpec& j : spec.jobs) {
    double values = 0;
    for (std::size_t t : j.plan.tensor_sizes) values += static_cast<double>(t);
    total += values / j.values_per_packet * j.plan.iterations * s.racks * s.workers_per_rack;
  }
  return total;
}

TEST(ScenarioDraw, EveryDrawIsInsideTheSpaceAndTheBudget) {
  std::set<std::string> models;
  std::set<double> losses;
  unsigned one_worker = 0, apart = 0, with_compute = 0;
  for (std::uint64_t seed = 1; seed <= 2000; ++seed) {
    const DrawnScenario d = draw_scenario(seed);
    expect_in_space(d);
    // Rounding each bucket up to whole packets may pass the budget by a little.
    EXPECT_LE(fragments(d.scenario), 1.1 * kFragmentBudget) << d.scenario.command_line();
    models.insert(d.scenario.models.begin(), d.scenario.models.end());
    losses.insert(d.loss);
    one_worker += d.loss_on_one_worker;
    apart += d.scenario.arrival_gap_us > 0;
    with_compute += d.scenario.compute_us > 0;
  }
  // The space is covered: every kind of job, every loss level, both loss placements,
  // both arrivals, synthetic jobs with and without compute phases.
  for (const std::string& m : workload::model_names()) EXPECT_TRUE(models.count(m)) << m;
  EXPECT_TRUE(models.count(kSyntheticJob));
  EXPECT_EQ(losses.size(), 7u);
  EXPECT_GT(one_worker, 100u);
  EXPECT_GT(apart, 500u);
  EXPECT_GT(with_compute, 200u);
}

TEST(ScenarioDraw, TheSameSeedDrawsTheSameScenarioAndOthersDiffer) {
  std::set<std::string> seen;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const std::string line = draw_scenario(seed).scenario.command_line();
    EXPECT_EQ(line, draw_scenario(seed).scenario.command_line());
    EXPECT_TRUE(seen.insert(line).second) << "seed " << seed << " repeats a scenario";
  }
}

TEST(ScenarioDraw, BaselinesChangeOnlyThePolicyOrTheLoss) {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    const Scenario drawn = draw_scenario(seed).scenario;
    EXPECT_EQ(scenario_variant(drawn, "atp").command_line(), drawn.command_line());
    Scenario s = scenario_variant(drawn, "static");
    EXPECT_EQ(s.policy, "static");
    s.policy = "atp";
    EXPECT_EQ(s.command_line(), drawn.command_line());
    s = scenario_variant(drawn, "lossless");
    EXPECT_EQ(s.loss + s.loss_one_worker, 0);
    s.loss = drawn.loss;
    s.loss_one_worker = drawn.loss_one_worker;
    EXPECT_EQ(s.command_line(), drawn.command_line());
    s = scenario_variant(drawn, "static-lossless");
    EXPECT_EQ(s.policy, "static");
    EXPECT_EQ(s.loss + s.loss_one_worker, 0);
  }
  EXPECT_THROW(scenario_variant(draw_scenario(1).scenario, "ring"), std::invalid_argument);
}

// A job whose --model entry is "synthetic" runs the tensor and compute phases, next to a
// zoo model's buckets in the same scenario.
TEST(ScenarioDraw, SyntheticEntriesRunTheTensorBesideZooModels) {
  Scenario s;
  s.jobs = 2;
  s.models = {kSyntheticJob, "resnet50"};
  s.tensor_bytes = 4096;
  s.compute_us = 50;
  s.model_scale = 4096;
  const ClusterSpec spec = to_cluster_spec(s);
  EXPECT_EQ(spec.jobs[0].plan.tensor_sizes, std::vector<std::size_t>{1024});
  EXPECT_EQ(spec.jobs[0].plan.compute, 50 * kMicrosecond);
  EXPECT_GT(spec.jobs[1].plan.tensor_sizes.size(), 1u);
  EXPECT_EQ(spec.jobs[1].plan.samples_per_iteration, 64u);
  // Without a synthetic entry, compute phases and layers are the models' own.
  s.models = {"resnet50"};
  EXPECT_THROW(to_cluster_spec(s), std::invalid_argument);
}

// Exactness only (timing never decides a test): the first 40 seeds, default ATP, in eight
// shards so ctest runs them side by side. The sweep itself checks every run of its seeds.
class DrawnScenarioRuns : public testing::TestWithParam<int> {};

TEST_P(DrawnScenarioRuns, AreExact) {
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t seed = 1 + GetParam() * 5 + i;
    const Scenario s = draw_scenario(seed).scenario;
    const ClusterReport r = run_cluster(to_cluster_spec(s));
    for (const JobReport& j : r.jobs)
      EXPECT_TRUE(j.exact) << "scenario seed " << seed << ", job " << j.job
                           << (j.finished ? " finished with wrong results" : " did not finish")
                           << " " << j.error << "\nreproduce: build/bin/atp sim --scenario-seed "
                           << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(FirstFortySeeds, DrawnScenarioRuns, testing::Range(0, 8));

}  // namespace
}  // namespace atp::sim
