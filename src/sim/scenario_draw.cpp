#include "sim/scenario_draw.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "workload/models.h"
#include "workload/rng.h"

namespace atp::sim {

namespace {

// The smallest scale a model runs at: the existing sweeps' (docs/sharing.md).
constexpr double kMinModelScale = 64;

template <typename T, std::size_t N>
T pick(workload::Rng& rng, const T (&choices)[N]) {
  return choices[rng.below(N)];
}

// Uniform on a log scale in [low, high]: delays and sizes spread over decades.
double log_uniform(workload::Rng& rng, double low, double high) {
  return low * std::pow(high / low, rng.uniform());
}

// Fragments one worker sends per iteration of a zoo model at scale 1.
double model_fragments(const std::string& model, const Scenario& s) {
  const workload::IterationPlan plan =
      workload::plan_iteration(workload::model_named(model), workload::gpu_flops(s.gpu), 1,
                               s.bucket_bytes, true);
  double values = 0;
  for (const workload::Bucket& b : plan.buckets) values += static_cast<double>(b.values);
  return values / s.values_per_packet;
}

void draw_fabric(workload::Rng& rng, Scenario& s) {
  s.racks = 1 + static_cast<unsigned>(rng.below(4));
  s.workers_per_rack = 2 + static_cast<unsigned>(rng.below(15));
  const double host_rates[] = {10, 25, 40, 50, 100};
  s.link_gbps = pick(rng, host_rates);
  const double core_factors[] = {1, 2, 4};
  s.core_gbps = s.link_gbps * pick(rng, core_factors);
  s.delay_us = log_uniform(rng, 1, 20);
  s.frame_bytes = 66;  // Ethernet, IPv4, UDP, FCS, preamble and gap: real links' rates
}

// Half the draws on the pool shares the sharing sweep names (100 / 67 / 50 / 33 / 25 %), half
// anywhere between, so that both the paper's points and the space between them are judged.
double draw_pool_share(workload::Rng& rng) {
  const double named[] = {1.0, 2.0 / 3, 0.5, 1.0 / 3, 0.25};
  return rng.chance(0.5) ? pick(rng, named) : 0.25 + 0.75 * rng.uniform();
}

void draw_jobs(workload::Rng& rng, Scenario& s) {
  s.jobs = 1 + static_cast<unsigned>(rng.below(8));
  const char* kinds[] = {"vgg16", "resnet50", "bert-base", "bert-large", kSyntheticJob};
  s.models.clear();
  for (unsigned j = 0; j < s.jobs; ++j) s.models.push_back(pick(rng, kinds));
  s.iterations = 3 + static_cast<std::uint32_t>(rng.below(2));
  // Synthetic jobs: one tensor of 0.5-8 MiB, and half the time compute phases of 0.3-2x the
  // time the tensor takes on a host link.
  s.tensor_bytes = 4 * static_cast<std::uint64_t>(log_uniform(rng, 1 << 17, 1 << 21));
  const double wire_us = static_cast<double>(s.tensor_bytes) * 8 / (s.link_gbps * 1e3);
  s.compute_us = rng.chance(0.5) ? wire_us * (0.3 + 1.7 * rng.uniform()) : 0;
  // Together, or each job up to 5 ms after the one before.
  s.arrival_gap_us = rng.chance(0.5) ? 0 : 5000 * rng.uniform();
}

// Scales the models and the synthetic tensor alike until the whole run fits the budget.
void fit_budget(Scenario& s) {
  const double workers = static_cast<double>(s.racks) * s.workers_per_rack;
  double model_fragments_at_1 = 0, synthetic_fragments = 0;
  for (const std::string& m : s.models) {
    if (m == kSyntheticJob)
      synthetic_fragments += static_cast<double>(s.tensor_bytes) / 4 / s.values_per_packet;
    else
      model_fragments_at_1 += model_fragments(m, s);
  }
  const double fragments =
      workers * s.iterations * (model_fragments_at_1 / kMinModelScale + synthetic_fragments);
  const double shrink = std::max(1.0, fragments / kFragmentBudget);
  s.model_scale = kMinModelScale * shrink;
  // At least one packet per tensor, in whole float32 values.
  s.tensor_bytes = std::max<std::uint64_t>(
      4u * s.values_per_packet,
      4 * static_cast<std::uint64_t>(static_cast<double>(s.tensor_bytes) / 4 / shrink));
  s.compute_us = synthetic_fragments > 0 ? s.compute_us / shrink : 0;
}

void draw_loss(workload::Rng& rng, Scenario& s, DrawnScenario& d) {
  // A third of the draws lossless; the rest at the loss sweep's levels.
  if (rng.chance(1.0 / 3)) return;
  const double levels[] = {0.0001, 0.001, 0.003, 0.01, 0.02, 0.05};
  d.loss = pick(rng, levels);
  d.loss_on_one_worker = rng.chance(0.3);
  (d.loss_on_one_worker ? s.loss_one_worker : s.loss) = d.loss;
}

}  // namespace

DrawnScenario draw_scenario(std::uint64_t seed) {
  workload::Rng rng(seed * 0xD1B54A32D192ED03ull + 0x5CE4A);
  DrawnScenario d;
  Scenario& s = d.scenario;
  s.seed = seed;
  draw_fabric(rng, s);
  const std::uint16_t ks[] = {64, 128, 256};
  s.values_per_packet = pick(rng, ks);
  s.window = 16u << rng.below(5);  // 16..256
  draw_jobs(rng, s);
  d.pool_share = draw_pool_share(rng);
  s.aggregators = std::max<std::uint32_t>(
      1, static_cast<std::uint32_t>(std::lround(d.pool_share * s.jobs * s.window)));
  d.pool_share = static_cast<double>(s.aggregators) / (s.jobs * s.window);
  s.parameter_servers = 1 + static_cast<unsigned>(rng.below(8));
  draw_loss(rng, s, d);
  fit_budget(s);
  // Simulated seconds. Most scenarios finish in well under one; static slices of a pool of a
  // few aggregators at 5 % loss crawl on timeouts (seed 1027's static run: 46 to 104 simulated
  // seconds, as the loss draw goes). The limit only stops a run that would never finish.
  s.time_limit_s = 600;
  return d;
}

std::vector<std::string> scenario_variants() {
  return {"atp", "static", "lossless", "static-lossless"};
}

Scenario scenario_variant(const Scenario& drawn, const std::string& variant) {
  const std::vector<std::string> known = scenario_variants();
  if (std::ranges::find(known, variant) == known.end())
    throw std::invalid_argument("unknown scenario variant '" + variant +
                                "' (known: atp, static, lossless, static-lossless)");
  Scenario s = drawn;
  if (variant.starts_with("static")) s.policy = "static";
  if (variant.ends_with("lossless")) s.loss = s.loss_one_worker = 0;
  return s;
}

}  // namespace atp::sim
