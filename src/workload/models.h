#pragma once
// A small model zoo for the simulator: each model's gradient tensors, built from its published
// layer shapes, with the multiply-accumulates each layer costs per sample, and what one
// training iteration of it costs on a named GPU. With it, a simulated job trains like a real
// one: gradients become ready layer by layer, last layer first, while the backward pass runs,
// and DDP-style buckets go to the allreduce as soon as they fill.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace atp::workload {

struct Layer {
  std::string name;
  std::uint64_t parameters = 0;  // float32 gradient values
  std::uint64_t forward_macs = 0;  // multiply-accumulates per sample, forward pass
};

struct Model {
  std::string name;
  std::vector<Layer> layers;  // in forward order
  std::uint32_t batch = 0;    // samples per worker per iteration
  std::string sample;         // what a sample is ("image", "sequence of 128 tokens")

  std::uint64_t parameters() const;
  std::uint64_t forward_macs() const;  // per sample
};

// resnet50, vgg16, bert-base, bert-large. Throws std::invalid_argument naming the known models.
Model model_named(std::string_view name);
std::vector<std::string> model_names();

// Sustained training FLOP/s of a GPU, calibrated from a published ResNet50 training
// throughput (see models.cpp): v100 (FP32) or a100 (TF32). Throws std::invalid_argument.
double gpu_flops(std::string_view gpu);

// One iteration's gradients as the allreduce sees them, times relative to the iteration's start.
struct Bucket {
  std::uint64_t values = 0;  // float32 values
  double ready_s = 0;        // when its last layer's gradient is ready
};
struct IterationPlan {
  std::vector<Bucket> buckets;  // in the order they are allreduced: last layers first
  double compute_s = 0;         // forward + backward
};

// Forward costs 1/3 of an iteration's FLOPs and backward 2/3 (2 x MACs per FLOP pair, the
// usual 3x-forward rule). Layers finish backward in reverse order, each taking its share of
// the backward time by MACs; consecutive layers fill buckets of up to `bucket_bytes` (DDP's
// bucket_cap_mb, 25 MiB by default; unlike DDP, a bucket closes before it would pass the cap,
// a layer larger than the cap goes alone, and there is no smaller first bucket). `scale` divides every layer's size and the compute time
// alike: a model scaled down keeps its ratio of communication to compute.
// With overlap = false, every bucket is ready when the backward pass ends.
IterationPlan plan_iteration(const Model& model, double gpu_flops_per_s, double scale,
                             std::uint64_t bucket_bytes, bool overlap);

}  // namespace atp::workload
