#include "workload/models.h"

#include <cmath>
#include <stdexcept>

namespace atp::workload {

namespace {

// A k x k convolution (and its batch norm or bias) producing an out_size x out_size map.
Layer conv(std::string name, std::uint64_t in, std::uint64_t out, std::uint64_t k,
           std::uint64_t out_size, std::uint64_t norm_or_bias) {
  return {std::move(name), k * k * in * out + norm_or_bias,
          out_size * out_size * k * k * in * out};
}

Layer dense(std::string name, std::uint64_t in, std::uint64_t out, std::uint64_t tokens = 1) {
  return {std::move(name), in * out + out, tokens * in * out};
}

// VGG16 (Simonyan & Zisserman 2015, configuration D) at 224 x 224: 138.4 M parameters,
// 15.5 G MACs per image.
Model vgg16() {
  Model m{"vgg16", {}, 64, "image"};
  const int widths[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512};
  std::uint64_t in = 3, size = 224;
  int index = 1;
  for (int w : widths) {
    if (w == 0) {  // 2 x 2 max pooling
      size /= 2;
      continue;
    }
    m.layers.push_back(conv("conv" + std::to_string(index++), in, w, 3, size, w));
    in = w;
  }
  m.layers.push_back(dense("fc6", 512 * 7 * 7, 4096));
  m.layers.push_back(dense("fc7", 4096, 4096));
  m.layers.push_back(dense("fc8", 4096, 1000));
  return m;
}

// ResNet50 v1.5 (He et al. 2016; the stride on the 3 x 3 convolution, as in torchvision) at
// 224 x 224: 25.6 M parameters, 4.1 G MACs per image. Batch norms carry 2 values per channel.
Model resnet50() {
  Model m{"resnet50", {}, 64, "image"};
  m.layers.push_back(conv("conv1", 3, 64, 7, 112, 2 * 64));
  const struct { std::uint64_t width, blocks, size; } stages[] = {
      {64, 3, 56}, {128, 4, 28}, {256, 6, 14}, {512, 3, 7}};
  std::uint64_t in = 64, in_size = 56;
  for (std::size_t s = 0; s < 4; ++s) {
    const auto [w, blocks, size] = stages[s];
    for (std::uint64_t b = 0; b < blocks; ++b) {
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      m.layers.push_back(conv(name + ".conv1", in, w, 1, in_size, 2 * w));
      m.layers.push_back(conv(name + ".conv2", w, w, 3, size, 2 * w));
      m.layers.push_back(conv(name + ".conv3", w, 4 * w, 1, size, 2 * 4 * w));
      if (b == 0) m.layers.push_back(conv(name + ".downsample", in, 4 * w, 1, size, 2 * 4 * w));
      in = 4 * w;
      in_size = size;
    }
  }
  m.layers.push_back(dense("fc", 2048, 1000));
  return m;
}

// A BERT encoder (Devlin et al. 2019; vocabulary 30,522, 512 positions) fine-tuned on sequences
// of 128 tokens with a two-class head. Embedding lookups cost no MACs.
Model bert(std::string name, int encoder_layers, std::uint64_t hidden, std::uint64_t ffn,
           std::uint32_t batch) {
  constexpr std::uint64_t kSeq = 128;
  Model m{std::move(name), {}, batch, "sequence of 128 tokens"};
  m.layers.push_back({"embeddings", (30522 + 512 + 2) * hidden + 2 * hidden, 0});
  for (int l = 0; l < encoder_layers; ++l) {
    const std::string layer = "encoder." + std::to_string(l);
    for (const char* part : {".query", ".key", ".value"})
      m.layers.push_back(dense(layer + part, hidden, hidden, kSeq));
    // Scores (Q K^T) and their weighted sum of values: no parameters.
    m.layers.push_back({layer + ".attention", 0, 2 * kSeq * kSeq * hidden});
    Layer out = dense(layer + ".attention.output", hidden, hidden, kSeq);
    out.parameters += 2 * hidden;  // layer norm
    m.layers.push_back(out);
    m.layers.push_back(dense(layer + ".intermediate", hidden, ffn, kSeq));
    Layer ffn_out = dense(layer + ".output", ffn, hidden, kSeq);
    ffn_out.parameters += 2 * hidden;
    m.layers.push_back(ffn_out);
  }
  m.layers.push_back(dense("pooler", hidden, hidden));
  m.layers.push_back(dense("classifier", hidden, 2));
  return m;
}

// BERT-base: 12 layers, hidden 768, 12 heads, intermediate 3072: 109.5 M parameters, 11.2 G MACs
// per sequence.
Model bert_base() { return bert("bert-base", 12, 768, 3072, 32); }

// BERT-large: 24 layers, hidden 1024, 16 heads, intermediate 4096: 335.1 M parameters, 39.5 G
// MACs per sequence; half BERT-base's batch, as its memory allows on the same GPU.
Model bert_large() { return bert("bert-large", 24, 1024, 4096, 16); }

}  // namespace

std::uint64_t Model::parameters() const {
  std::uint64_t n = 0;
  for (const Layer& l : layers) n += l.parameters;
  return n;
}

std::uint64_t Model::forward_macs() const {
  std::uint64_t n = 0;
  for (const Layer& l : layers) n += l.forward_macs;
  return n;
}

std::vector<std::string> model_names() { return {"resnet50", "vgg16", "bert-base", "bert-large"}; }

Model model_named(std::string_view name) {
  if (name == "resnet50") return resnet50();
  if (name == "vgg16") return vgg16();
  if (name == "bert-base") return bert_base();
  if (name == "bert-large") return bert_large();
  throw std::invalid_argument("unknown model '" + std::string(name) +
                              "' (known: resnet50, vgg16, bert-base, bert-large)");
}

// NVIDIA's DeepLearningExamples, PyTorch ResNet50 v1.5 README (pytorch-21.03 container),
// training throughput on one GPU: 367 images/s on a V100 16GB in FP32, 938 images/s on an
// A100 80GB in TF32. Times 3 x 2 FLOPs per MAC of one forward pass gives the FLOP/s that GPU
// sustains on a convolutional training loop; other models are assumed to run as efficiently.
double gpu_flops(std::string_view gpu) {
  const double resnet50_flops_per_image = 6.0 * static_cast<double>(resnet50().forward_macs());
  if (gpu == "v100") return 367 * resnet50_flops_per_image;
  if (gpu == "a100") return 938 * resnet50_flops_per_image;
  throw std::invalid_argument("unknown GPU '" + std::string(gpu) + "' (known: v100, a100)");
}

IterationPlan plan_iteration(const Model& model, double gpu_flops_per_s, double scale,
                             std::uint64_t bucket_bytes, bool overlap) {
  if (!(scale >= 1) || !(gpu_flops_per_s > 0) || bucket_bytes < 4)
    throw std::invalid_argument("plan_iteration: scale >= 1, a positive GPU rate and buckets "
                                "of at least one value");
  const double macs = static_cast<double>(model.forward_macs()) * model.batch;
  IterationPlan plan;
  plan.compute_s = 6 * macs / gpu_flops_per_s / scale;
  const double forward_s = plan.compute_s / 3, backward_s = plan.compute_s - forward_s;
  const std::uint64_t cap = bucket_bytes / 4;
  std::uint64_t bucket = 0, done_macs = 0;
  double bucket_ready = forward_s;  // when the bucket's last gradient so far is ready
  auto close = [&] {
    if (bucket == 0) return;
    const auto values = static_cast<std::uint64_t>(std::ceil(static_cast<double>(bucket) / scale));
    plan.buckets.push_back({values, overlap ? bucket_ready : plan.compute_s});
    bucket = 0;
  };
  for (auto l = model.layers.rbegin(); l != model.layers.rend(); ++l) {
    done_macs += l->forward_macs * model.batch;
    if (l->parameters == 0) continue;  // backward time, but no gradient
    if (bucket > 0 && bucket + l->parameters > cap) close();
    bucket += l->parameters;
    bucket_ready = forward_s + backward_s * static_cast<double>(done_macs) / macs;
  }
  close();
  return plan;
}

}  // namespace atp::workload
