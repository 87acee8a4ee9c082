#pragma once
// Whole scenarios drawn from a seed (DESIGN.md §7a): performance claims are judged over a
// distribution nobody chose, not over one sweep. A draw fixes the fabric (racks, workers,
// rates, delays), the jobs (zoo models or synthetic, with or without compute phases), K, the
// window, the pool as a share of what static slices need, the parameter servers, the loss and
// the arrivals; scripts/scenario-sweep.py runs each against its baselines, and
// `atp sim --scenario-seed N` replays any one.
#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario.h"

namespace atp::sim {

struct DrawnScenario {
  Scenario scenario;  // default ATP, as drawn
  // What the draw meant, for grouping results: the pool over jobs x window (what static
  // slices need for every job's full window), the loss and where it is.
  double pool_share = 1;
  double loss = 0;            // per link, on every link or on one worker's links
  bool loss_on_one_worker = false;
};

// The space (issue 48): racks 1-4; workers per rack 2-16; jobs 1-8, each VGG16, ResNet50,
// BERT-base, BERT-large or synthetic (with or without compute phases); host links 10-100
// Gbit/s, core 1-4x the host rate; delays 1-20 us; K 64/128/256; windows 16-256; pool
// 25-100 % of static's need; 1-8 PSs; no loss, or 0.01-5 % on every link or on one worker's
// links; jobs arriving together or up to 5 ms apart. Models are scaled down (bytes and compute
// alike) until the run sends at most `kFragmentBudget` fragments, so that it takes seconds.
DrawnScenario draw_scenario(std::uint64_t seed);

// Fragments (packets of K values, every worker, every iteration) a scenario sends at most.
inline constexpr double kFragmentBudget = 400'000;

// The baselines a drawn scenario runs against: "atp" (as drawn), "static" (static slices,
// the same loss), "lossless" (ATP without loss) and "static-lossless". Throws
// std::invalid_argument naming the known variants.
Scenario scenario_variant(const Scenario& drawn, const std::string& variant);
std::vector<std::string> scenario_variants();

}  // namespace atp::sim
