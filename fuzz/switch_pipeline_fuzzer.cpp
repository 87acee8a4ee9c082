// The switch pipeline on packet sequences from honest members, strangers and forgers, mixed
// with control-plane changes. Besides "no crash, no UB", it checks after every packet:
//  - tenant isolation: a packet that may not speak for its job (wrong token, or a sender the
//    job does not list) is dropped and changes no aggregator; a packet of job A never changes
//    an aggregator job B holds;
//  - what leaves is a well-formed ATP packet of the same length, sent only to the job's own
//    members or next hops;
//  - pool bookkeeping: every held aggregator belongs to an installed job, and its count is the
//    number of contributors in its bitmap.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "engines/switch/switch_pipeline.h"
#include "fuzz_packets.h"

namespace {

using namespace atp;
using engines::AggregatorView;
using engines::Port;
using Action = engines::Verdict::Action;

constexpr std::uint32_t kJobs = 3;
constexpr std::uint32_t kPool = 8;
constexpr std::uint16_t kWidth = 8;

std::uint32_t token_of(std::uint32_t job) { return 0xA7000000u + job; }

engines::SwitchJob make_job(std::uint32_t id, FuzzedDataProvider& in) {
  engines::SwitchJob j;
  j.job = id;
  const unsigned members = in.ConsumeIntegralInRange<unsigned>(1, 4);
  for (unsigned m = 0; m < members; ++m) j.downstream.push_back(static_cast<Port>(10 * id + m));
  j.upstream = {static_cast<Port>(100 + id)};
  if (in.ConsumeBool()) j.upstream.push_back(static_cast<Port>(200 + id));  // a second PS shard
  j.multicast_group = static_cast<engines::MulticastGroupId>(id);
  j.window = 1u << in.ConsumeIntegralInRange<unsigned>(0, 3);
  j.static_first = (id - 1) * 2;
  j.static_count = in.ConsumeIntegralInRange<std::uint32_t>(0, 2);
  // Usually the real fan-in; sometimes one the headers disagree with.
  j.fan_in = in.ConsumeBool() ? static_cast<std::uint8_t>(members)
                              : in.ConsumeIntegralInRange<std::uint8_t>(1, 4);
  j.token = token_of(id);
  return j;
}

std::vector<AggregatorView> snapshot(const engines::SwitchPipeline& sw) {
  std::vector<AggregatorView> s;
  for (std::uint32_t i = 0; i < kPool; ++i) s.push_back(sw.registers().view(i));
  return s;
}

bool contains(const std::vector<Port>& v, Port n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

// Another job's aggregator may change in two ways only: taken over once its claim is stale
// (two claim epochs of stale_after / 2), or freed, untouched otherwise, by a packet whose keyed
// seq (seq ^ token) is the one it holds: a coincidence of two jobs' secrets, which the fuzzer,
// knowing every token, can make on purpose (a tenant cannot).
bool taken_over(const AggregatorView& before, Time now, Time stale_after) {
  return before.claim_epoch <= engines::claim_clock(now, stale_after).expired_at_or_before();
}

bool freed_by_key(AggregatorView before, const AggregatorView& after, const proto::Header& h) {
  const auto key = engines::OwnerTag::of(h.job, proto::run_of(h.tensor), h.seq, h.token).lo;
  if (before.owner.lo != key || after.valid()) return false;
  before.claim_epoch = 0;
  return before == after;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  engines::SwitchConfig config;
  config.level = in.ConsumeBool() ? proto::Level::rack : proto::Level::spine;
  config.pool_size = kPool;
  config.values_per_pass = kWidth;
  config.policy = static_cast<engines::Policy>(in.ConsumeIntegralInRange<int>(0, 2));
  // Short enough that orphans are taken over within a run's 256 ms.
  config.stale_after = in.ConsumeIntegralInRange<Time>(1, 64) * kMillisecond;
  engines::SwitchPipeline sw(config);

  std::vector<std::optional<engines::SwitchJob>> installed(kJobs + 1);
  for (std::uint32_t id = 1; id <= kJobs; ++id) {
    installed[id] = make_job(id, in);
    sw.add_job(*installed[id]);
  }
  const std::vector<std::uint32_t> tokens = {token_of(1), token_of(2), token_of(3)};
  const fuzzing::PacketRanges ranges{kJobs, 16, kPool * 2, kWidth + 2};

  for (int step = 0; step < 256 && in.remaining_bytes() > 0; ++step) {
    const int op = in.ConsumeIntegralInRange<int>(0, 31);
    if (op == 0) {  // the control plane removes or (re)installs a job
      const auto id = in.ConsumeIntegralInRange<std::uint32_t>(1, kJobs);
      if (installed[id] && in.ConsumeBool()) {
        sw.remove_job(id);
        installed[id].reset();
        for (std::uint32_t i = 0; i < kPool; ++i)
          if (sw.registers().view(i).valid() && sw.registers().view(i).owner.job() == id)
            std::abort();
      } else {
        installed[id] = make_job(id, in);
        sw.add_job(*installed[id]);
      }
      continue;
    }

    std::vector<std::uint8_t> packet = fuzzing::next_packet(in, ranges, tokens);
    // The port it arrives on: a member of some job, a PS-side hop, or a stranger's.
    Port from = 0;
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: from = in.ConsumeIntegral<Port>(); break;
      case 1: from = static_cast<Port>(100 + in.ConsumeIntegralInRange<Port>(1, kJobs)); break;
      default:
        from = static_cast<Port>(10 * in.ConsumeIntegralInRange<Port>(1, kJobs) +
                                 in.ConsumeIntegralInRange<Port>(0, 3));
    }
    const bool congested = in.ConsumeBool();

    proto::Header h;
    const bool decodes = proto::decode(packet, h) == proto::DecodeError::ok;
    const engines::SwitchJob* job =
        decodes && h.job >= 1 && h.job <= kJobs && installed[h.job] ? &*installed[h.job] : nullptr;
    const bool authentic =
        job && h.token == job->token &&
        contains(h.is_downward() ? job->upstream : job->downstream, from);

    const std::vector<AggregatorView> before = snapshot(sw);
    const std::size_t length = packet.size();
    const Time now = static_cast<Time>(step) * kMillisecond;
    const engines::Verdict verdict = sw.process(packet, from, now, congested);
    const std::vector<AggregatorView> after = snapshot(sw);

    if (!authentic && verdict.action != Action::drop) std::abort();
    for (std::uint32_t i = 0; i < kPool; ++i) {
      const bool changed = before[i] != after[i];
      if (changed && !authentic) std::abort();  // a forgery or stranger touched the pool
      if (changed && h.kind != proto::Kind::fragment) std::abort();  // the handshake never does
      if (changed && before[i].valid() && before[i].owner.job() != h.job &&
          !taken_over(before[i], now, config.stale_after) && !freed_by_key(before[i], after[i], h))
        std::abort();  // job h.job changed a live aggregator another job held
      const AggregatorView& a = after[i];
      if (a.valid() && (a.owner.job() > kJobs || !installed[a.owner.job()])) std::abort();
      if (a.valid() && a.count != std::popcount(a.bitmap)) std::abort();
    }

    if (verdict.action == Action::drop) continue;
    proto::Header out;
    if (packet.size() != length || proto::decode(packet, out) != proto::DecodeError::ok)
      std::abort();
    if (out.job != h.job || out.seq != h.seq || out.token != h.token) std::abort();
    if (verdict.action == Action::port && !contains(job->upstream, verdict.port) &&
        !contains(job->downstream, verdict.port))
      std::abort();
    const auto group = sw.multicast_ports(verdict.group);
    if (verdict.action == Action::multicast &&
        (verdict.group != job->multicast_group ||
         !std::equal(group.begin(), group.end(), job->downstream.begin(), job->downstream.end())))
      std::abort();
  }
  return 0;
}
