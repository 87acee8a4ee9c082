// Throughput of the quantizer against memcpy of the same number of bytes.
//
// For each buffer size (64 KiB, 1 MiB and 16 MiB of floats) it measures memcpy, quantize and
// dequantize on the best ISA and on every supported ISA, floats_to_wire (the float32
// fallback), and quantize / dequantize of float16 and bfloat16 tensors of the same size (best
// ISA). All report bytes/s of the tensor (input of quantize, output of dequantize). After the run a table gives each operation's
// throughput as a ratio to memcpy at the same size, measured in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "quant/quantizer.h"

namespace {

using atp::quant::Isa;
using atp::quant::Precision;

constexpr int kWorkers = 8;

struct SizeCase {
  const char* label;
  std::size_t bytes;
};
constexpr SizeCase kSizes[] = {{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}};

// One set of buffers per size, filled once and shared by every benchmark of that size.
struct Buffers {
  std::vector<float> floats;
  std::vector<std::uint8_t> wire;
  std::vector<float> back;
  float scale = 1.0f;
};

Buffers& buffers_for(std::size_t bytes) {
  static std::map<std::size_t, std::unique_ptr<Buffers>> cache;
  auto& slot = cache[bytes];
  if (!slot) {
    slot = std::make_unique<Buffers>();
    const std::size_t n = bytes / sizeof(float);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> gradient(-1.0f, 1.0f);
    slot->floats.resize(n);
    for (float& x : slot->floats) x = gradient(rng);
    slot->scale = atp::quant::choose_scale(1.0f, kWorkers);
    slot->wire.resize(bytes);
    slot->back.resize(n);
    // Valid wire data for the dequantize benchmarks; also faults every page in.
    atp::quant::quantize_to_wire(slot->floats.data(), n, slot->scale, slot->wire.data());
    std::fill(slot->back.begin(), slot->back.end(), 0.0f);
  }
  return *slot;
}

void bm_memcpy(benchmark::State& state, std::size_t bytes) {
  Buffers& b = buffers_for(bytes);
  for (auto _ : state) {
    std::memcpy(b.wire.data(), b.floats.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void bm_quantize(benchmark::State& state, std::size_t bytes, const Isa* isa) {
  Buffers& b = buffers_for(bytes);
  const std::size_t n = bytes / sizeof(float);
  for (auto _ : state) {
    const bool ok =
        isa ? atp::quant::quantize_to_wire(*isa, b.floats.data(), n, b.scale, b.wire.data())
            : atp::quant::quantize_to_wire(b.floats.data(), n, b.scale, b.wire.data());
    benchmark::DoNotOptimize(ok);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void bm_dequantize(benchmark::State& state, std::size_t bytes, const Isa* isa) {
  Buffers& b = buffers_for(bytes);
  const std::size_t n = bytes / sizeof(float);
  for (auto _ : state) {
    if (isa) atp::quant::dequantize_from_wire(*isa, b.wire.data(), n, b.scale, b.back.data());
    else atp::quant::dequantize_from_wire(b.wire.data(), n, b.scale, b.back.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

// A half-precision tensor of `bytes` bytes (bytes / 2 values) from the same gradients, its wire
// buffer (twice its bytes: int32 on the wire) and a result tensor. Throughput is the tensor's
// bytes per second, so the ratio to memcpy of the same size is against copying the tensor.
struct HalfBuffers {
  std::vector<std::uint16_t> values;
  std::vector<std::uint8_t> wire;
  std::vector<std::uint16_t> back;
  float scale = 1.0f;
};

HalfBuffers& half_buffers_for(std::size_t bytes, Precision precision) {
  static std::map<std::pair<std::size_t, Precision>, std::unique_ptr<HalfBuffers>> cache;
  auto& slot = cache[{bytes, precision}];
  if (!slot) {
    slot = std::make_unique<HalfBuffers>();
    const std::size_t n = bytes / 2;
    const Buffers& source = buffers_for(2 * bytes);  // n floats
    slot->scale = source.scale;
    slot->wire.resize(4 * n);
    slot->values.resize(n);
    slot->back.resize(n);
    // The floats' rounded halves, by way of the wire: exact for these scaled gradients.
    atp::quant::quantize_to_wire(source.floats.data(), n, source.scale, slot->wire.data());
    atp::quant::dequantize_from_wire(precision, slot->wire.data(), n, slot->scale,
                                     slot->values.data());
  }
  return *slot;
}

void bm_quantize_half(benchmark::State& state, std::size_t bytes, Precision precision) {
  HalfBuffers& b = half_buffers_for(bytes, precision);
  for (auto _ : state) {
    const bool ok = atp::quant::quantize_to_wire(precision, b.values.data(), b.values.size(),
                                                 b.scale, atp::quant::kAnyMagnitude,
                                                 b.wire.data());
    benchmark::DoNotOptimize(ok);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void bm_dequantize_half(benchmark::State& state, std::size_t bytes, Precision precision) {
  HalfBuffers& b = half_buffers_for(bytes, precision);
  for (auto _ : state) {
    atp::quant::dequantize_from_wire(precision, b.wire.data(), b.back.size(), b.scale,
                                     b.back.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void bm_floats_to_wire(benchmark::State& state, std::size_t bytes) {
  Buffers& b = buffers_for(bytes);
  for (auto _ : state) {
    atp::quant::floats_to_wire(b.floats.data(), bytes / sizeof(float), b.wire.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512};

// Benchmark names are "<operation>/<size label>", e.g. "quantize/avx2/1MiB".
void register_all() {
  for (const SizeCase& size : kSizes) {
    const std::string suffix = std::string("/") + size.label;
    const std::size_t bytes = size.bytes;
    benchmark::RegisterBenchmark(("memcpy" + suffix).c_str(), bm_memcpy, bytes);
    const std::string best = "best(" + std::string(to_string(atp::quant::best_isa())) + ")";
    benchmark::RegisterBenchmark(("quantize/" + best + suffix).c_str(), bm_quantize, bytes,
                                 nullptr);
    for (const Isa& isa : kAllIsas) {
      if (!atp::quant::supported(isa)) continue;
      const std::string name = "quantize/" + std::string(to_string(isa)) + suffix;
      benchmark::RegisterBenchmark(name.c_str(), bm_quantize, bytes, &isa);
    }
    benchmark::RegisterBenchmark(("dequantize/" + best + suffix).c_str(), bm_dequantize, bytes,
                                 nullptr);
    for (const Isa& isa : kAllIsas) {
      if (!atp::quant::supported(isa)) continue;
      const std::string name = "dequantize/" + std::string(to_string(isa)) + suffix;
      benchmark::RegisterBenchmark(name.c_str(), bm_dequantize, bytes, &isa);
    }
    benchmark::RegisterBenchmark(("floats_to_wire" + suffix).c_str(), bm_floats_to_wire, bytes);
    for (Precision precision : {Precision::float16, Precision::bfloat16}) {
      const std::string p(to_string(precision));
      benchmark::RegisterBenchmark(("quantize " + p + suffix).c_str(), bm_quantize_half, bytes,
                                   precision);
      benchmark::RegisterBenchmark(("dequantize " + p + suffix).c_str(), bm_dequantize_half,
                                   bytes, precision);
    }
  }
}

// Prints the usual console output and remembers each benchmark's bytes/s for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      const auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end() || it->second.value <= 0) continue;  // e.g. failed runs
      const std::string& name = run.run_name.function_name;
      const std::string op = name.substr(0, name.rfind('/'));
      if (std::find(operations_.begin(), operations_.end(), op) == operations_.end())
        operations_.push_back(op);
      Samples& s = samples_[name];
      // With --benchmark_repetitions prefer the median aggregate; otherwise the single run.
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") s.median = it->second.value;
      } else {
        s.iterations.push_back(it->second.value);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void print_ratio_table() const {
    std::printf("\nThroughput relative to memcpy of the same size, same run (GB/s in brackets):\n");
    std::printf("%-24s", "operation");
    for (const SizeCase& size : kSizes) std::printf("%26s", size.label);
    std::printf("\n");
    for (const std::string& op : operations_) {
      std::printf("%-24s", op.c_str());
      for (const SizeCase& size : kSizes) {
        const double base = rate(std::string("memcpy/") + size.label);
        const double value = rate(op + "/" + size.label);
        if (base > 0 && value > 0) std::printf("%13.2f (%5.1f GB/s)", value / base, value / 1e9);
        else std::printf("%26s", "n/a");
      }
      std::printf("\n");
    }
  }

 private:
  struct Samples {
    std::vector<double> iterations;
    double median = 0;
  };

  double rate(const std::string& name) const {
    const auto it = samples_.find(name);
    if (it == samples_.end()) return 0;
    if (it->second.median > 0) return it->second.median;
    std::vector<double> v = it->second.iterations;
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  std::vector<std::string> operations_;  // Names without the size, in run order.
  std::map<std::string, Samples> samples_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratio_table();
  benchmark::Shutdown();
  return 0;
}
