// The worker's result path: results (with any results_behind), duplicates, float requests,
// remaps, forgeries and timer expiries in any order, over tensors of any size and content
// (huge values, NaN, infinity), allreduced or as a reduce-scatter shard (its own, answered with
// values and done copies; or another worker's, whose output the worker must never touch).
//
// Honest mode answers each fragment the worker sent with what a PS would send if a second
// worker had the same gradient (twice the fragment, as int32 or as floats), in any order and
// any number of times; when the allreduce finishes, the output must equal the exact sum.
// Chaos mode adds arbitrary packets with the right token. In both, a forged packet or a
// stranger's must change nothing (not the output buffer, not the state), and everything the
// worker sends must be a well-formed upward packet to its uplink.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "engines/worker/worker.h"
#include "fuzz_packets.h"
#include "workload/gradients.h"

namespace {

using namespace atp;

constexpr NodeId kUplink = 50;
constexpr std::uint32_t kToken = 0xC0FFEE;

float next_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return std::numeric_limits<float>::infinity();
    case 2: return in.ConsumeFloatingPoint<float>();  // anything, huge included
    default: return in.ConsumeFloatingPointInRange<float>(-1.0f, 1.0f);
  }
}

// PS 0's answer to a join: run `run` for the asker's nonce.
std::vector<std::uint8_t> joined(std::vector<std::uint8_t> join, std::uint16_t run) {
  proto::Header h;
  if (proto::decode(join, h) != proto::DecodeError::ok) std::abort();
  h.kind = proto::Kind::joined;
  h.next_level = proto::Level::parameter_server;
  h.tensor = proto::wire_tensor(run, 0);
  proto::encode(h, join);
  return join;
}

// What a PS answers to `fragment` when the job's other worker sent the same values.
std::vector<std::uint8_t> doubled_result(std::vector<std::uint8_t> fragment) {
  proto::Header h;
  if (proto::decode(fragment, h) != proto::DecodeError::ok) std::abort();
  const bool floats = h.has(proto::flag::kFloatPayload);
  h.flags = proto::flag::kResult | (floats ? proto::flag::kFloatPayload : 0);
  h.next_level = proto::Level::parameter_server;
  h.workers_bitmap = 0;  // a result names no worker (or one: a late copy for its asker)
  proto::encode(h, fragment);
  for (unsigned i = 0; i < h.value_count; ++i) {
    std::uint8_t* at = fragment.data() + proto::kHeaderBytes + 4 * i;
    if (floats) {
      float f;
      const std::uint32_t bits = proto::load_be32(at);
      std::memcpy(&f, &bits, 4);
      f = static_cast<float>(static_cast<double>(f) + static_cast<double>(f));
      std::uint32_t out;
      std::memcpy(&out, &f, 4);
      proto::store_be32(at, out);
    } else {
      proto::store_be_i32(at, 2 * proto::load_be_i32(at));  // within sum_safe_magnitude(2)
    }
  }
  return fragment;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool honest = in.ConsumeBool();
  engines::WorkerConfig config;
  config.job = 1;
  config.rack_fan_in = 2;
  config.job_workers = 2;
  config.values_per_packet = 4;
  config.window = 1u << in.ConsumeIntegralInRange<unsigned>(0, 3);
  config.scale = 1 << 20;
  config.uplink = kUplink;
  config.token = kToken;
  if (in.ConsumeBool()) {  // the run comes from the handshake
    config.run = std::nullopt;
    config.join_nonce = 0x5EED;
  }
  engines::Worker worker(config);

  std::vector<float> input(in.ConsumeIntegralInRange<std::size_t>(0, 48));
  for (float& v : input) v = next_value(in);
  std::vector<float> output(input.size(), -12345.0f);
  // 0: an allreduce; 1: this worker's reduce-scatter shard; 2: another worker's shard.
  const int shard = in.ConsumeIntegralInRange<int>(0, 2);
  const proto::ResultOwner self{0, 0}, other{0, 1};

  Outbox out;
  Time now = 0;
  std::map<std::uint32_t, std::vector<std::uint8_t>> sent;  // latest fragment per seq
  std::vector<std::uint8_t> join;                          // the latest join, if any
  constexpr std::uint16_t kRun = 5;
  auto collect = [&] {
    for (const Datagram& d : out.packets()) {
      proto::Header h;
      if (d.to != kUplink || proto::decode(d.bytes, h) != proto::DecodeError::ok ||
          h.is_downward() || h.job != config.job || h.token != kToken)
        std::abort();
      if (h.kind == proto::Kind::join) {
        if (config.run || worker.run() || h.seq != config.join_nonce) std::abort();
        join = d.bytes;
        continue;
      }
      if (h.kind == proto::Kind::query) {  // only for a fragment of this run it sent
        const auto it = sent.find(h.seq);
        proto::Header f;
        if (it == sent.end() || proto::decode(it->second, f) != proto::DecodeError::ok ||
            f.tensor != h.tensor || h.value_count != 0)
          std::abort();
        continue;
      }
      // No fragment before the run is known, and then only of that run.
      if (!worker.run() || proto::run_of(h.tensor) != *worker.run()) std::abort();
      sent[h.seq] = d.bytes;
    }
    out.clear();
  };
  const std::uint32_t tensor =
      shard == 0 ? worker.submit(now, input, output, out)
                 : worker.submit(now, quant::Precision::float32, input.data(),
                                 shard == 1 ? output.data() : nullptr, input.size(), out,
                                 shard == 1 ? self : other);
  collect();
  const std::vector<std::uint32_t> tokens = {kToken};

  for (int step = 0; step < 512 && in.remaining_bytes() > 0; ++step) {
    const int op = in.ConsumeIntegralInRange<int>(0, 9);
    if (op == 0) {  // time passes; retransmission timers fire
      now += in.ConsumeIntegralInRange<Duration>(0, 2 * kSecond);
      worker.on_timer(now, out);
      collect();
      continue;
    }
    std::vector<std::uint8_t> packet;
    if (!honest && op == 1) {
      packet = fuzzing::next_packet(in, {1, 16, 16, 6}, tokens);
    } else if (!join.empty() && (sent.empty() || op == 4)) {
      const bool someone_elses = !honest && op == 4;  // another worker's (or launch's) answer
      packet = joined(join, someone_elses ? kRun + 1 : kRun);
      if (someone_elses) packet[12] ^= 0x01;
    } else if (!sent.empty()) {
      auto it = sent.begin();
      std::advance(it, in.ConsumeIntegralInRange<std::size_t>(0, sent.size() - 1));
      packet = doubled_result(it->second);
      if (shard != 0 && in.ConsumeBool()) {  // a shard's done copy: the header alone
        packet.resize(proto::kHeaderBytes);
        proto::store_be16(packet.data() + proto::offset::value_count, 0);
      }
      if (!honest && op == 2) {  // the PS asks for floats instead
        proto::Header h;
        if (proto::decode(packet, h) != proto::DecodeError::ok) std::abort();
        h.flags = proto::flag::kFloatRequest;
        h.workers_bitmap = 0b11;  // a resend request naming two workers
        proto::encode(h, packet);
      } else if (in.ConsumeBool()) {
        // The PS's word on which earlier results it had sent, true or not: a wrong bit may
        // cost queries, never a value or the exact sum.
        proto::store_be16(packet.data() + proto::offset::results_behind,
                          in.ConsumeIntegral<std::uint16_t>());
      }
    } else {
      continue;
    }
    if (!honest && op == 3 && packet.size() >= proto::kHeaderBytes) {
      proto::Header h;
      if (proto::decode(packet, h) == proto::DecodeError::ok) {
        h.set(proto::flag::kRemap);
        h.remap_index = in.ConsumeIntegral<std::uint32_t>();
        proto::encode(h, packet);
      }
    }
    std::optional<NodeId> from = kUplink;
    bool forged = false;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
      case 0: from = kUnknownNode; forged = true; break;
      case 1: from = std::nullopt; break;
      case 2:
        if (packet.size() >= proto::kHeaderBytes) packet[41] ^= 0x01;  // (usually) a wrong token
        break;
      default: break;
    }
    {  // judged on the packet as sent: a chaos packet's random token may be the right one
      proto::Header h;
      if (proto::decode(packet, h) == proto::DecodeError::ok && h.job == config.job &&
          h.token != kToken)
        forged = true;
    }
    const std::vector<float> output_before = output;
    const engines::WorkerStats stats_before = worker.stats();
    worker.on_packet(now, packet, out, from);
    if (!config.run && worker.run() && *worker.run() != kRun) std::abort();  // not its answer
    if (forged) {
      if (!out.empty() || worker.stats().results != stats_before.results ||
          !std::equal(output.begin(), output.end(), output_before.begin(), same_float))
        std::abort();
    }
    collect();
    now += in.ConsumeIntegralInRange<Duration>(0, kMillisecond);
  }

  if (shard == 2) {  // another worker's shard: its values never reach this worker's output
    for (float v : output)
      if (v != -12345.0f) std::abort();
    return 0;
  }
  if (honest && worker.status(tensor) == engines::AllreduceStatus::done) {
    workload::ExactSum exact(config.values_per_packet, config.scale, 2);
    exact.reset(input.size());
    exact.add(input);
    exact.add(input);
    std::vector<float> expected(input.size());
    exact.finish(expected);
    for (std::size_t i = 0; i < input.size(); ++i)
      if (!same_float(output[i], expected[i])) std::abort();
  }
  return 0;
}
