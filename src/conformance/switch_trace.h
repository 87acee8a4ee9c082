#pragma once
// Switch traces: what went into a switch pipeline and what came out, packet by packet, so the
// same packets can be replayed through another implementation of the pipeline (the C++ one
// here, the P4 programs on BMv2 in p4/) and the outputs compared field by field.
//
// Format (docs/engines.md §2.12): JSON Lines. The first line is the switch's configuration;
// then one line per control-plane change or packet:
//   {"setup": {"level": 1, "pool_size": 16, "values_per_pass": 8, "passes": 1,
//              "policy": "atp", "stale_after_ns": 1000000000}}
//   {"add_job": {"job": 1, "downstream": [1, 2], "upstream": [100], "window": 4, ...}}
//   {"remove_job": 1}
//   {"packet": {"time_ns": 0, "ingress_port": 1, "congested": false, "in": "01000100...",
//               "verdict": {"action": "port", "port": 100, "group": 0, "passes": 1},
//               "out": "0100..."}}
// Bytes are lower-case hex; "out" is the packet after the pipeline (empty when dropped);
// "passes" the trips through a P4 switch's pipe it takes (engines::passes_for, or
// kReleasePasses for a released rack sum; 1 if absent).
#include <iosfwd>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engines/switch/switch_pipeline.h"

namespace atp::conformance {

struct PacketRecord {
  Time time = 0;
  engines::Port ingress_port = 0;
  bool congested = false;
  std::vector<std::uint8_t> in;
  engines::Verdict verdict;
  std::vector<std::uint8_t> out;
};
struct RemoveJob {
  std::uint32_t job = 0;
};
using TraceEvent = std::variant<engines::SwitchJob, RemoveJob, PacketRecord>;

struct Trace {
  engines::SwitchConfig setup;
  std::vector<TraceEvent> events;
};

// Throws std::invalid_argument naming the line on a malformed trace.
Trace read_trace(std::istream& in);
void write_trace(std::ostream& out, const Trace& trace);

// A switch pipeline that records everything done to it into a Trace (unless told not to).
class RecordingSwitch {
 public:
  explicit RecordingSwitch(engines::SwitchConfig config, bool recording = true)
      : pipeline_(config), recording_(recording) {
    trace_.setup = config;
  }
  void add_job(const engines::SwitchJob& job);
  bool remove_job(std::uint32_t job);
  // Ingress and egress with one `congested` for every copy, recorded as one packet.
  engines::Verdict process(std::span<std::uint8_t> packet, engines::Port ingress_port, Time now,
                           bool congested = false);
  // Ingress alone (the caller marks each copy at egress), recorded with congested = false.
  engines::Verdict ingress(std::span<std::uint8_t> packet, engines::Port ingress_port, Time now);

  engines::SwitchPipeline& pipeline() { return pipeline_; }
  const engines::SwitchPipeline& pipeline() const { return pipeline_; }
  const Trace& trace() const { return trace_; }

 private:
  engines::SwitchPipeline pipeline_;
  bool recording_;
  Trace trace_;
};

// Writes `trace` to `path`; throws std::runtime_error if it cannot.
void write_trace_file(const std::string& path, const Trace& trace);
Trace read_trace_file(const std::string& path);

// The first packet whose outputs differ, described field by field.
struct Difference {
  std::size_t packet = 0;  // index among the trace's packet records
  std::string what;
};
// Runs `trace` through `run` (a fresh pipeline of the trace's setup, given each control change
// and packet) and compares every packet's verdict and bytes out with the recorded ones.
std::optional<Difference> replay(const Trace& trace);
// Compares two outputs of one packet; empty when equal.
std::string compare_outputs(const engines::Verdict& expected_verdict,
                            std::span<const std::uint8_t> expected,
                            const engines::Verdict& actual_verdict,
                            std::span<const std::uint8_t> actual);

}  // namespace atp::conformance
