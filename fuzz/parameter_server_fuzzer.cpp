// The parameter server on packet sequences, in two modes chosen by the first input byte.
//
// Honest mode: every packet with the job's token is a sum some switch could really have made
// (whole racks plus some workers of one more rack, of value f(worker, seq, i)), sent any number
// of times, in any order, as resends, collisions, wrapped sums or float fragments. Every result
// the PS sends must then be the exact sum over all the job's workers: dedup never counts a
// worker twice or misses one. Forged packets and strangers are mixed in and must change nothing.
//
// Chaos mode: arbitrary packets, also with the right token. Only "no crash, no UB, bounded
// memory, well-formed output to the job's switch" can be asked there.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "engines/ps/parameter_server.h"
#include "fuzz_packets.h"

namespace {

using namespace atp;

constexpr std::uint32_t kJobs = 2;
constexpr std::uint16_t kValues = 4;

std::uint32_t token_of(std::uint32_t job) { return 0x5EC00000u + job; }
NodeId switch_of(std::uint32_t job) { return 100 + job; }

// Worker w's gradient value i for fragment seq in run `run`: small, so no integer sum
// overflows unless the fuzzer marks it wrapped.
std::int32_t gradient(unsigned worker, std::uint32_t seq, unsigned i, unsigned run) {
  return static_cast<std::int32_t>((worker * 7 + seq * 3 + i + run * 5) % 11) - 5;
}

struct JobShape {
  engines::PsJob config;
  std::vector<unsigned> first_worker;  // global index of rack r's first worker
  unsigned workers = 0;
};

JobShape make_job(std::uint32_t id, FuzzedDataProvider& in, std::uint32_t plan) {
  JobShape s;
  s.config.job = id;
  const unsigned racks = in.ConsumeIntegralInRange<unsigned>(1, 3);
  for (unsigned r = 0; r < racks; ++r) {
    s.first_worker.push_back(s.workers);
    const auto n = in.ConsumeIntegralInRange<std::uint8_t>(1, 3);
    s.config.workers_per_rack.push_back(n);
    s.workers += n;
  }
  s.config.window = 1u << in.ConsumeIntegralInRange<unsigned>(0, 2);
  // A ring of one or two windows: short, so entries are reclaimed often.
  s.config.ring = s.config.window << in.ConsumeIntegralInRange<unsigned>(0, 1);
  s.config.values_per_packet = kValues;
  s.config.downstream = switch_of(id);
  s.config.pool_size = in.ConsumeBool() ? 8 : 0;
  // The aggregator plan (1: home turns, 2: borrowing, 3: no home, borrowing the whole pool):
  // plans ride on every result and never change a sum.
  s.config.home = {4 * (id - 1), plan == 3 ? 0u : 4u, 1};
  s.config.borrow = plan >= 2;
  s.config.token = token_of(id);
  return s;
}

// A sum a switch could have produced: racks in `racks_bitmap` complete, plus `workers` of `rack`.
std::vector<std::uint8_t> honest_packet(FuzzedDataProvider& in, const JobShape& job,
                                        std::uint32_t seq, std::uint16_t run) {
  const auto& per_rack = job.config.workers_per_rack;
  const auto racks = static_cast<unsigned>(per_rack.size());
  proto::Header h;
  h.next_level = proto::Level::parameter_server;
  h.job = job.config.job;
  h.seq = seq;
  h.tensor = proto::wire_tensor(run, 0);  // a restarted job is a later run at the same seqs
  h.aggregator = seq;
  h.job_fan_in = static_cast<std::uint8_t>(racks);
  h.rack = in.ConsumeIntegralInRange<std::uint8_t>(0, static_cast<std::uint8_t>(racks - 1));
  h.rack_fan_in = per_rack[h.rack];
  h.value_count = kValues;
  h.token = job.config.token;
  const bool as_floats = in.ConsumeIntegralInRange<int>(0, 5) == 0;
  if (as_floats) {  // overflow fallback: one worker's own values as float32
    h.workers_bitmap = 1u << in.ConsumeIntegralInRange<unsigned>(0, h.rack_fan_in - 1);
    h.set(proto::flag::kFloatPayload);
  } else {
    h.racks_bitmap = in.ConsumeIntegral<std::uint32_t>() & proto::low_bits(racks) &
                     ~(1u << h.rack);
    h.workers_bitmap = in.ConsumeIntegral<std::uint32_t>() & proto::low_bits(h.rack_fan_in);
    if (h.racks_bitmap == 0 && h.workers_bitmap == 0) h.workers_bitmap = 1;
    h.set(proto::flag::kWrapped, in.ConsumeIntegralInRange<int>(0, 15) == 0);
  }
  h.set(proto::flag::kResend, in.ConsumeBool());
  h.set(proto::flag::kCollision, in.ConsumeBool());
  h.set(proto::flag::kEcn, in.ConsumeBool());

  std::vector<std::uint8_t> p(h.packet_bytes());
  proto::encode(h, p);
  for (unsigned i = 0; i < kValues; ++i) {
    std::int64_t sum = 0;
    for (unsigned r = 0; r < racks; ++r)
      for (unsigned w = 0; w < per_rack[r]; ++w) {
        const bool in_sum = (h.racks_bitmap >> r & 1) || (r == h.rack && (h.workers_bitmap >> w & 1));
        if (in_sum) sum += gradient(job.first_worker[r] + w, seq, i, run);
      }
    std::uint8_t* at = p.data() + proto::kHeaderBytes + 4 * i;
    if (as_floats) {
      const float f = static_cast<float>(sum);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      proto::store_be32(at, bits);
    } else {
      // A wrapped sum's values are garbage by definition: the PS must not use them.
      proto::store_be_i32(at, h.has(proto::flag::kWrapped) ? 0x7fffffff : static_cast<std::int32_t>(sum));
    }
  }
  return p;
}

void check_result(const JobShape& job, const proto::Header& h, std::span<const std::uint8_t> p) {
  if (!h.has(proto::flag::kResult)) return;  // a float request carries no values
  if (h.value_count != kValues) std::abort();
  for (unsigned i = 0; i < kValues; ++i) {
    std::int64_t exact = 0;
    for (unsigned w = 0; w < job.workers; ++w) exact += gradient(w, h.seq, i, proto::run_of(h.tensor));
    const std::uint8_t* at = p.data() + proto::kHeaderBytes + 4 * i;
    if (h.has(proto::flag::kFloatPayload)) {
      float f;
      const std::uint32_t bits = proto::load_be32(at);
      std::memcpy(&f, &bits, 4);
      if (f != static_cast<float>(exact)) std::abort();
    } else if (proto::load_be_i32(at) != exact) {
      std::abort();  // a worker counted twice, or one missing
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool honest = in.ConsumeBool();
  const auto plan = in.ConsumeIntegralInRange<std::uint32_t>(1, 3);
  engines::ParameterServer ps;
  std::vector<JobShape> jobs;
  for (std::uint32_t id = 1; id <= kJobs; ++id) {
    jobs.push_back(make_job(id, in, plan));
    ps.add_job(jobs.back().config);
  }
  const std::vector<std::uint32_t> tokens = {token_of(1), token_of(2)};
  const fuzzing::PacketRanges ranges{kJobs, 16, 8, kValues + 1};
  Outbox out;
  Time now = 0;

  for (int step = 0; step < 512 && in.remaining_bytes() > 0; ++step) {
    const auto id = in.ConsumeIntegralInRange<std::uint32_t>(1, kJobs);
    const JobShape& job = jobs[id - 1];
    std::vector<std::uint8_t> packet;
    if (honest) {
      const auto seq = in.ConsumeIntegralInRange<std::uint32_t>(0, 4 * job.config.ring);
      packet = honest_packet(in, job, seq, in.ConsumeIntegralInRange<std::uint16_t>(0, 1));
    } else {
      packet = fuzzing::next_packet(in, ranges, tokens);
    }
    std::optional<NodeId> from = switch_of(id);
    bool forged = false;
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: from = kUnknownNode; forged = true; break;
      case 1: from = std::nullopt; break;
      case 2:  // the right sender with (usually) a wrong token
        if (packet.size() >= proto::kHeaderBytes) packet[40] ^= 0x80;
        break;
      default: break;
    }
    proto::Header h;
    const bool decodes = proto::decode(packet, h) == proto::DecodeError::ok;
    // Judged on the packet as sent: a chaos packet's random token may be the right one.
    if (decodes && h.job >= 1 && h.job <= kJobs &&
        (h.token != token_of(h.job) || (from && *from != switch_of(h.job))))
      forged = true;

    out.clear();
    const auto held_before = ps.entries_in_use(id);
    ps.on_packet(now, packet, out, from);
    now += in.ConsumeIntegralInRange<Duration>(0, kMillisecond);

    if (forged && (out.size() != 0 || ps.entries_in_use(id) != held_before)) std::abort();
    if (decodes && h.kind != proto::Kind::fragment && ps.entries_in_use(id) != held_before)
      std::abort();  // the handshake and result queries hold no aggregation state
    for (std::uint32_t j = 1; j <= kJobs; ++j)
      if (ps.entries_in_use(j) > 2 * jobs[j - 1].config.ring) std::abort();
    for (const Datagram& d : out.packets()) {
      proto::Header r;
      if (proto::decode(d.bytes, r) != proto::DecodeError::ok || !r.is_downward()) std::abort();
      if (r.job < 1 || r.job > kJobs || d.to != switch_of(r.job) || r.token != token_of(r.job))
        std::abort();
      if (honest) check_result(jobs[r.job - 1], r, d.bytes);
    }
  }
  return 0;
}
