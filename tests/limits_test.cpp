// The limits catalogue (docs/reliability.md): what happens at and beyond each limit. Every
// case ends in an exact result, a defined and documented one, or a clear error; never a wrong
// sum and never a crash.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>

#include "engines/worker/worker.h"
#include "sim/cluster.h"
#include "sim/scenario.h"

namespace atp {
namespace {

sim::Scenario small() {
  sim::Scenario s;
  s.workers_per_rack = 3;
  s.aggregators = 64;
  s.window = 16;
  s.values_per_packet = 32;
  s.tensor_bytes = 32 << 10;
  s.iterations = 2;
  s.time_limit_s = 30;
  return s;
}

void expect_exact(const sim::Scenario& s, const sim::ClusterReport& r) {
  for (const auto& j : r.jobs)
    EXPECT_TRUE(j.exact) << "job " << j.job << " mismatches=" << j.mismatches
                         << " error=" << j.error << "\nreproduce: " << s.command_line();
}

TEST(Limits, MoreJobsThanAggregatorsAllFinishExactly) {
  sim::Scenario s = small();
  s.jobs = 6;
  s.aggregators = 2;  // every job's window alone is 8 times the pool
  const auto r = sim::run_cluster(sim::to_cluster_spec(s));
  expect_exact(s, r);
  std::uint64_t collisions = 0;
  for (const auto& j : r.jobs) collisions += j.switches.collisions;
  EXPECT_GT(collisions, 0u);  // the PSs did most of the work
}

TEST(Limits, FullFanInsOfThirtyTwoWorkersPerRackAndManyRacks) {
  sim::Scenario s = small();
  s.racks = 3;
  s.workers_per_rack = 32;  // a full 32-bit bitmap at level 1
  s.iterations = 1;
  const auto r = sim::run_cluster(sim::to_cluster_spec(s));
  expect_exact(s, r);
  EXPECT_EQ(r.jobs[0].fraction_in_network, 1.0);
}

TEST(Limits, NaNAndHugeGradientsAreSummedAsFloatsWhereTheyAre) {
  sim::Scenario s = small();
  s.overflow_fraction = 0.001;  // values past what int32 can carry at this scale
  auto spec = sim::to_cluster_spec(s);
  spec.jobs[0].gradients.nan_fraction = 0.001;
  // The verifier's exact sum carries NaN (any NaN) where some worker's value was NaN, and the
  // float sum in rank order for the rest of that fragment.
  const auto r = sim::run_cluster(spec);
  expect_exact(s, r);
  EXPECT_GT(r.jobs[0].workers.float_fragments, 0u);
}

TEST(Limits, TensorBeyondTwoToThePowerThirtyFragmentsIsRefusedUpFront) {
  engines::WorkerConfig c;
  c.values_per_packet = 1;
  engines::Worker w(c);
  // 2^30 + 1 floats of address space, never touched: the refusal comes before any read.
  const std::size_t n = (std::size_t{1} << 30) + 1;
  void* memory = ::mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* floats = static_cast<float*>(memory);
  Outbox out;
  try {
    w.submit(0, std::span<const float>(floats, n), std::span<float>(floats, n), out);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(w.idle());
  ::munmap(memory, n * sizeof(float));
}

}  // namespace
}  // namespace atp
