// Model workloads (the zoo, DDP buckets, backward overlapping communication) and the host-only
// ring allreduce baseline, on the deterministic simulator.
#include <gtest/gtest.h>

#include <stdexcept>

#include "proto/byte_order.h"
#include "sim/cluster.h"
#include "sim/ring_allreduce.h"
#include "sim/scenario.h"
#include "workload/models.h"

namespace atp {
namespace {

using workload::model_named;

// The models' sizes as their papers and torchvision give them: parameters exactly, forward
// MACs per sample within 1 %.
TEST(ModelZoo, SizesMatchThePublishedModels) {
  EXPECT_EQ(model_named("vgg16").parameters(), 138'357'544u);
  EXPECT_EQ(model_named("resnet50").parameters(), 25'557'032u);
  // BERT-base's 109,482,240 (with the pooler) and a two-class head of 768 x 2 + 2.
  EXPECT_EQ(model_named("bert-base").parameters(), 109'482'240u + 1'538u);
  EXPECT_NEAR(model_named("vgg16").forward_macs() / 1e9, 15.47, 0.15);
  EXPECT_NEAR(model_named("resnet50").forward_macs() / 1e9, 4.09, 0.04);
  EXPECT_NEAR(model_named("bert-base").forward_macs() / 1e9, 11.2, 0.11);
  // BERT-large's 335,141,888 (with the pooler) and a two-class head of 1024 x 2 + 2; 24
  // layers of 128 tokens x 12.6 M MACs, plus attention.
  EXPECT_EQ(model_named("bert-large").parameters(), 335'141'888u + 2'050u);
  EXPECT_NEAR(model_named("bert-large").forward_macs() / 1e9, 39.5, 0.4);
  EXPECT_THROW(model_named("alexnet"), std::invalid_argument);
  EXPECT_THROW(workload::gpu_flops("k80"), std::invalid_argument);
}

TEST(ModelZoo, BucketsFillBackToFrontAndBecomeReadyDuringTheBackwardPass) {
  const workload::Model vgg = model_named("vgg16");
  const double flops = workload::gpu_flops("v100");
  const auto plan = workload::plan_iteration(vgg, flops, 1, 25 << 20, true);
  std::uint64_t values = 0;
  double previous = 0;
  for (const auto& b : plan.buckets) {
    values += b.values;
    EXPECT_GE(b.ready_s, previous);
    EXPECT_GE(b.ready_s, plan.compute_s / 3);  // not before the forward pass ends
    previous = b.ready_s;
  }
  EXPECT_EQ(values, vgg.parameters());
  EXPECT_DOUBLE_EQ(plan.buckets.back().ready_s, plan.compute_s);
  // Each fully connected layer is larger than a bucket (6.6 M values) on its own.
  EXPECT_EQ(plan.buckets[0].values, 4096u * 1000 + 1000);
  EXPECT_EQ(plan.buckets[2].values, 512u * 7 * 7 * 4096 + 4096);
  // The first bucket (fc8) is ready long before the backward pass ends.
  EXPECT_LT(plan.buckets.front().ready_s, 0.4 * plan.compute_s);
  // VGG16's 64 images take 6 x MACs x 64 FLOPs at the V100's rate.
  EXPECT_NEAR(plan.compute_s, 6.0 * vgg.forward_macs() * 64 / flops, 1e-9);

  const auto serial = workload::plan_iteration(vgg, flops, 1, 25 << 20, false);
  for (const auto& b : serial.buckets) EXPECT_DOUBLE_EQ(b.ready_s, serial.compute_s);
  const auto scaled = workload::plan_iteration(vgg, flops, 64, 25 << 20, true);
  EXPECT_NEAR(scaled.compute_s * 64, plan.compute_s, 1e-9);
  EXPECT_EQ(scaled.buckets.size(), plan.buckets.size());
  EXPECT_THROW(workload::plan_iteration(vgg, flops, 0.5, 25 << 20, true), std::invalid_argument);
}

sim::Scenario ring_scenario() {
  sim::Scenario s;
  s.racks = 2;
  s.workers_per_rack = 3;
  s.values_per_packet = 64;
  s.window = 16;
  s.collective = "ring";
  s.iterations = 2;
  s.link_gbps = 10;
  return s;
}

void expect_exact(const sim::Scenario& s, const sim::ClusterReport& r) {
  for (const auto& j : r.jobs)
    EXPECT_TRUE(j.exact) << "job " << j.job << " finished=" << j.finished << " error=" << j.error
                         << " checked=" << j.results_checked << "\n" << s.command_line();
}

// Odd sizes: chunks of unequal length, a chunk shorter than a packet, empty chunks.
TEST(RingAllreduce, SumsExactlyAcrossRacksForAnySize) {
  sim::Scenario s = ring_scenario();
  s.layer_bytes = {4, 20, 4 * 64 * 6, 4 * 1001, 256 << 10};
  const sim::ClusterReport r = sim::run_cluster(sim::to_cluster_spec(s));
  expect_exact(s, r);
  EXPECT_EQ(r.jobs[0].ps.packets_in, 0u);  // the hosts alone
  EXPECT_EQ(r.switches.packets, 0u);  // the pipeline never sees ring packets
  EXPECT_EQ(r.jobs[0].switches.aggregated, 0u);
  for (unsigned workers : {1u, 2u}) {
    s.racks = 1;
    s.workers_per_rack = workers;
    expect_exact(s, sim::run_cluster(sim::to_cluster_spec(s)));
  }
}

// Each worker sends 2 (N - 1) / N of the tensor: with 6 workers, 5/3 of what an ATP worker
// sends, so on the same links the ring takes longer.
TEST(RingAllreduce, SendsTwoNMinusOneChunksPerWorkerAndTakesLongerThanAtp) {
  sim::Scenario ring = ring_scenario();
  ring.tensor_bytes = 1 << 20;
  const auto r = sim::run_cluster(sim::to_cluster_spec(ring));
  expect_exact(ring, r);
  // 262,144 values in chunks of 43,691 (the last 43,689): 683 packets each, 10 steps.
  const std::uint64_t packets_per_worker = 10 * 683;
  EXPECT_EQ(r.jobs[0].workers.fragments_sent, 6 * packets_per_worker * ring.iterations);
  sim::Scenario atp = ring;
  atp.collective = "atp";
  const auto a = sim::run_cluster(sim::to_cluster_spec(atp));
  expect_exact(atp, a);
  EXPECT_GT(r.jobs[0].completion_time, a.jobs[0].completion_time);
}

TEST(RingAllreduce, RunsBesideAtpJobsAndRefusesALossyFabric) {
  sim::Scenario s = ring_scenario();
  s.jobs = 3;
  s.tensor_bytes = 256 << 10;
  sim::ClusterSpec spec = sim::to_cluster_spec(s);
  spec.jobs[1].collective = sim::CollectiveKind::atp;
  const auto r = sim::run_cluster(spec);
  expect_exact(s, r);
  EXPECT_GT(r.jobs[1].ps.packets_in, 0u);
  EXPECT_EQ(r.jobs[0].ps.packets_in + r.jobs[2].ps.packets_in, 0u);
  s.loss = 0.01;
  EXPECT_THROW(sim::to_cluster_spec(s), std::invalid_argument);
}

// A packet naming a step or packet the tensor does not have changes nothing.
TEST(RingAllreduce, OutOfRangePacketsAreCountedAndIgnored) {
  sim::RingConfig c;
  c.rank = 1;
  c.workers = 3;
  c.self = 11;
  c.successor = 12;
  c.uplink = 5;
  c.values_per_packet = 4;
  sim::RingAllreduce ring(c);
  Outbox out;
  std::vector<float> in(24, 0.5f), result(24);
  ring.submit(0, in, result, out);
  for (std::uint32_t step : {0u, 9u}) {
    std::vector<std::uint8_t> p(sim::kRingHeaderBytes + 16, 0);
    proto::store_be32(p.data(), sim::kRingMagic);
    proto::store_be32(p.data() + 4, 11);                  // to
    proto::store_be32(p.data() + 8, 10);                  // from
    proto::store_be32(p.data() + 16, step);               // step 9 > the last (3)
    proto::store_be32(p.data() + 20, step == 0 ? 7 : 0);  // packet 7 of a 2-packet chunk
    proto::store_be32(p.data() + 24, 4);                  // count
    ring.on_packet(0, p, out, 5);
  }
  EXPECT_EQ(ring.stats().malformed, 2u);
  EXPECT_TRUE(ring.take_completed().empty());
}

// No tensors and no compute: each iteration ends at once, and the job finishes.
TEST(ModelWorkload, AnIterationWithNothingToDoStillEnds) {
  sim::Scenario s;
  s.racks = 1;
  s.workers_per_rack = 2;
  sim::ClusterSpec spec = sim::to_cluster_spec(s);
  spec.jobs[0].plan.tensor_sizes.clear();
  spec.jobs[0].plan.compute = 0;
  spec.jobs[0].plan.start = 0;
  const auto r = sim::run_cluster(spec);
  EXPECT_TRUE(r.jobs[0].finished);
}

sim::Scenario model_scenario(const std::string& model) {
  sim::Scenario s;
  s.racks = 2;
  s.workers_per_rack = 2;
  s.models = {model};
  s.model_scale = 256;
  s.link_gbps = 10;
  s.iterations = 3;
  return s;
}

// Overlapping the backward pass hides communication: the same job finishes sooner than when
// every bucket waits for the end of compute, and both are exact.
TEST(ModelWorkload, OverlappingTheBackwardPassFinishesSooner) {
  for (const char* model : {"resnet50", "bert-base"}) {
    sim::Scenario overlap = model_scenario(model);
    sim::Scenario serial = overlap;
    serial.no_overlap = true;
    const auto a = sim::run_cluster(sim::to_cluster_spec(overlap));
    const auto b = sim::run_cluster(sim::to_cluster_spec(serial));
    expect_exact(overlap, a);
    expect_exact(serial, b);
    EXPECT_LT(a.jobs[0].completion_time, b.jobs[0].completion_time) << model;
    EXPECT_EQ(a.jobs[0].samples_per_iteration, model_named(model).batch);
  }
}

// An iteration never ends before its compute does, however fast the network.
TEST(ModelWorkload, AnIterationLastsAtLeastItsCompute) {
  sim::Scenario s = model_scenario("vgg16");
  s.link_gbps = 1000;
  const sim::ClusterSpec spec = sim::to_cluster_spec(s);
  const auto r = sim::run_cluster(spec);
  expect_exact(s, r);
  const Duration compute = spec.jobs[0].plan.compute;
  EXPECT_GE(r.jobs[0].completion_time - r.jobs[0].start, 3 * compute);
  EXPECT_LT(r.jobs[0].completion_time - r.jobs[0].start, 4 * compute);
}

TEST(ModelWorkload, BadOptionsAreRefusedByName) {
  sim::Scenario s = model_scenario("resnet50");
  s.compute_us = 10;
  EXPECT_THROW(sim::to_cluster_spec(s), std::invalid_argument);
  s = model_scenario("gpt-5");
  EXPECT_THROW(sim::to_cluster_spec(s), std::invalid_argument);
  s = model_scenario("resnet50");
  s.model_scale = 0.5;
  EXPECT_THROW(sim::to_cluster_spec(s), std::invalid_argument);
  s = model_scenario("resnet50");
  s.gpu = "tpu";
  EXPECT_THROW(sim::to_cluster_spec(s), std::invalid_argument);
}

}  // namespace
}  // namespace atp
