#include "conformance/switch_trace.h"

#include <fmt/format.h>

#include <fstream>
#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <stdexcept>

#include "proto/byte_order.h"

namespace atp::conformance {

using nlohmann::json;
using engines::Verdict;

namespace {

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

std::vector<std::uint8_t> from_hex(const std::string& s) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("not a hex digit: '" + std::string(1, c) + "'");
  };
  if (s.size() % 2 != 0) throw std::invalid_argument("odd number of hex digits");
  std::vector<std::uint8_t> bytes(s.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>(digit(s[2 * i]) << 4 | digit(s[2 * i + 1]));
  return bytes;
}

const char* action_name(Verdict::Action a) {
  switch (a) {
    case Verdict::Action::drop: return "drop";
    case Verdict::Action::port: return "port";
    case Verdict::Action::multicast: return "multicast";
  }
  return "?";
}

Verdict::Action action_of(const std::string& name) {
  if (name == "drop") return Verdict::Action::drop;
  if (name == "port") return Verdict::Action::port;
  if (name == "multicast") return Verdict::Action::multicast;
  throw std::invalid_argument("unknown verdict action '" + name + "'");
}

json setup_json(const engines::SwitchConfig& c) {
  return {{"level", static_cast<int>(c.level)}, {"pool_size", c.pool_size},
          {"values_per_pass", c.values_per_pass}, {"passes", c.passes},
          {"policy", engines::to_string(c.policy)}, {"stale_after_ns", c.stale_after}};
}

engines::SwitchConfig setup_of(const json& j) {
  engines::SwitchConfig c;
  c.level = static_cast<proto::Level>(j.at("level").get<int>());
  c.pool_size = j.at("pool_size");
  c.values_per_pass = j.at("values_per_pass");
  c.passes = j.at("passes");
  if (!engines::parse_policy(j.at("policy"), c.policy))
    throw std::invalid_argument("unknown policy");
  c.stale_after = j.at("stale_after_ns");
  return c;
}

json job_json(const engines::SwitchJob& j) {
  return {{"job", j.job},           {"downstream", j.downstream},
          {"upstream", j.upstream}, {"window", j.window},
          {"static_first", j.static_first}, {"static_count", j.static_count},
          {"fan_in", j.fan_in},     {"token", j.token},
          {"multicast_group", j.multicast_group}};
}

engines::SwitchJob job_of(const json& j) {
  engines::SwitchJob s;
  s.job = j.at("job");
  s.downstream = j.at("downstream").get<std::vector<engines::Port>>();
  s.upstream = j.at("upstream").get<std::vector<engines::Port>>();
  s.window = j.at("window");
  s.static_first = j.at("static_first");
  s.static_count = j.at("static_count");
  s.fan_in = j.at("fan_in");
  s.token = j.at("token");
  s.multicast_group = j.at("multicast_group");
  return s;
}

json packet_json(const PacketRecord& p) {
  return {{"time_ns", p.time},
          {"ingress_port", p.ingress_port},
          {"congested", p.congested},
          {"in", to_hex(p.in)},
          {"verdict",
           {{"action", action_name(p.verdict.action)},
            {"port", p.verdict.port},
            {"group", p.verdict.group},
            {"passes", p.verdict.passes}}},
          {"out", to_hex(p.out)}};
}

PacketRecord packet_of(const json& j) {
  PacketRecord p;
  p.time = j.at("time_ns");
  p.ingress_port = j.at("ingress_port");
  p.congested = j.at("congested");
  p.in = from_hex(j.at("in"));
  const json& v = j.at("verdict");
  p.verdict = {action_of(v.at("action")), v.at("port"), v.at("group"), v.value("passes", 1)};
  p.out = from_hex(j.at("out"));
  return p;
}

// The header fields a switch may change, by name, for a readable difference.
std::string compare_headers(const proto::Header& e, const proto::Header& a) {
  std::string d;
  auto field = [&](const char* name, auto expected, auto actual) {
    if (expected != actual)
      d += fmt::format("{}{}: expected {:#x}, got {:#x}", d.empty() ? "" : "; ", name,
                       static_cast<std::uint64_t>(expected), static_cast<std::uint64_t>(actual));
  };
  field("kind", static_cast<int>(e.kind), static_cast<int>(a.kind));
  field("flags", e.flags, a.flags);
  field("next_level", static_cast<int>(e.next_level), static_cast<int>(a.next_level));
  field("ps_index", e.ps_index, a.ps_index);
  field("job", e.job, a.job);
  field("tensor", e.tensor, a.tensor);
  field("seq", e.seq, a.seq);
  field("aggregator", e.aggregator, a.aggregator);
  field("workers_bitmap", e.workers_bitmap, a.workers_bitmap);
  field("racks_bitmap", e.racks_bitmap, a.racks_bitmap);
  field("rack_fan_in", e.rack_fan_in, a.rack_fan_in);
  field("job_fan_in", e.job_fan_in, a.job_fan_in);
  field("rack", e.rack, a.rack);
  field("value_count", e.value_count, a.value_count);
  field("remap_index", e.remap_index, a.remap_index);
  field("token", e.token, a.token);
  return d;
}

}  // namespace

std::string compare_outputs(const Verdict& expected_verdict, std::span<const std::uint8_t> expected,
                            const Verdict& actual_verdict, std::span<const std::uint8_t> actual) {
  if (expected_verdict != actual_verdict)
    return "verdict: expected " + engines::to_string(expected_verdict) + ", got " +
           engines::to_string(actual_verdict);
  if (expected_verdict.action == Verdict::Action::drop) return {};
  if (expected.size() != actual.size())
    return fmt::format("length: expected {}, got {}", expected.size(), actual.size());
  proto::Header e, a;
  if (proto::decode(expected, e) == proto::DecodeError::ok &&
      proto::decode(actual, a) == proto::DecodeError::ok) {
    if (std::string d = compare_headers(e, a); !d.empty()) return "header " + d;
    for (std::size_t i = proto::kHeaderBytes; i + 4 <= expected.size(); i += 4) {
      const std::int32_t x = proto::load_be_i32(expected.data() + i);
      const std::int32_t y = proto::load_be_i32(actual.data() + i);
      if (x != y)
        return fmt::format("value {}: expected {}, got {}", (i - proto::kHeaderBytes) / 4, x, y);
    }
  }
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (expected[i] != actual[i])
      return fmt::format("byte {}: expected {:#04x}, got {:#04x}", i, expected[i], actual[i]);
  return {};
}

void write_trace(std::ostream& out, const Trace& trace) {
  out << json{{"setup", setup_json(trace.setup)}}.dump() << '\n';
  for (const TraceEvent& event : trace.events) {
    json line;
    if (const auto* job = std::get_if<engines::SwitchJob>(&event)) line = {{"add_job", job_json(*job)}};
    else if (const auto* gone = std::get_if<RemoveJob>(&event)) line = {{"remove_job", gone->job}};
    else line = {{"packet", packet_json(std::get<PacketRecord>(event))}};
    out << line.dump() << '\n';
  }
}

Trace read_trace(std::istream& in) {
  Trace trace;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    if (text.empty()) continue;
    try {
      const json j = json::parse(text);
      if (line == 1) {
        trace.setup = setup_of(j.at("setup"));
      } else if (j.contains("add_job")) {
        trace.events.emplace_back(job_of(j["add_job"]));
      } else if (j.contains("remove_job")) {
        trace.events.emplace_back(RemoveJob{j["remove_job"].get<std::uint32_t>()});
      } else {
        trace.events.emplace_back(packet_of(j.at("packet")));
      }
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format("trace line {}: {}", line, e.what()));
    }
  }
  return trace;
}

void RecordingSwitch::add_job(const engines::SwitchJob& job) {
  pipeline_.add_job(job);
  if (recording_) trace_.events.emplace_back(job);
}

bool RecordingSwitch::remove_job(std::uint32_t job) {
  if (recording_) trace_.events.emplace_back(RemoveJob{job});
  return pipeline_.remove_job(job);
}

Verdict RecordingSwitch::process(std::span<std::uint8_t> packet, engines::Port ingress_port,
                                 Time now, bool congested) {
  if (!recording_) return pipeline_.process(packet, ingress_port, now, congested);
  PacketRecord r{now, ingress_port, congested, {packet.begin(), packet.end()}, {}, {}};
  const Verdict verdict = pipeline_.process(packet, ingress_port, now, congested);
  r.verdict = verdict;
  if (verdict.action != Verdict::Action::drop) r.out.assign(packet.begin(), packet.end());
  trace_.events.emplace_back(std::move(r));
  return verdict;
}

Verdict RecordingSwitch::ingress(std::span<std::uint8_t> packet, engines::Port ingress_port,
                                 Time now) {
  // Ingress alone is process() on a port that is never congested.
  return process(packet, ingress_port, now, false);
}

void write_trace_file(const std::string& path, const Trace& trace) {
  std::ofstream out(path);
  write_trace(out, trace);
  if (!out.flush()) throw std::runtime_error("cannot write trace " + path);
}

Trace read_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read trace " + path);
  return read_trace(in);
}

std::optional<Difference> replay(const Trace& trace) {
  engines::SwitchPipeline sw(trace.setup);
  std::size_t packets = 0;
  std::vector<std::uint8_t> bytes;
  for (const TraceEvent& event : trace.events) {
    if (const auto* job = std::get_if<engines::SwitchJob>(&event)) {
      sw.add_job(*job);
    } else if (const auto* gone = std::get_if<RemoveJob>(&event)) {
      sw.remove_job(gone->job);
    } else {
      const auto& p = std::get<PacketRecord>(event);
      bytes = p.in;
      const Verdict v = sw.process(bytes, p.ingress_port, p.time, p.congested);
      if (v.action == Verdict::Action::drop) bytes.clear();
      if (std::string d = compare_outputs(p.verdict, p.out, v, bytes); !d.empty())
        return Difference{packets, d};
      ++packets;
    }
  }
  return std::nullopt;
}

}  // namespace atp::conformance
