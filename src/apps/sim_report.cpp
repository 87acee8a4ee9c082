#include "apps/sim_report.h"

#include <fmt/format.h>

namespace atp::apps {

namespace {

double gbps(std::uint64_t bytes, Duration time) {
  return time > 0 ? static_cast<double>(bytes) * 8 / static_cast<double>(time) : 0;
}

// What the job's allreduces took, the launch's run handshake included.
double throughput_gbps(const sim::JobReport& j) { return gbps(j.tensor_bytes, j.communication_time); }

// The iterations after the first: without the launch's run handshake, a one-time cost (two
// rounds of joins, min_rto apart) that outweighs a few simulated iterations and whose lost
// joins say nothing about loss recovery on the data path. 0 with a single iteration.
double steady_gbps(const sim::JobReport& j) {
  if (j.iterations < 2) return 0;
  return gbps(j.tensor_bytes / j.iterations * (j.iterations - 1),
              j.communication_time - j.first_allreduce_time);
}

// Training as a user sees it, over the iterations after the first (as steady_gbps): 0 with a
// single iteration.
double iterations_per_second(const sim::JobReport& j) {
  if (j.iterations < 2 || j.completion_time <= j.first_iteration_end) return 0;
  return (j.iterations - 1) / (static_cast<double>(j.completion_time - j.first_iteration_end) / kSecond);
}

// Per interval, per job (in the report's job order): {"end_s", "jobs": [{"in_network",
// "at_ps", "collisions"}]}.
nlohmann::json series_json(const sim::ClusterReport& report) {
  nlohmann::json samples = nlohmann::json::array();
  for (const sim::SeriesSample& s : report.series) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const sim::JobInterval& j : s.jobs)
      jobs.push_back({{"in_network", j.in_network}, {"at_ps", j.at_ps}, {"collisions", j.collisions}});
    samples.push_back({{"end_s", static_cast<double>(s.end) / kSecond}, {"jobs", jobs}});
  }
  return samples;
}

}  // namespace

nlohmann::json to_json(const sim::ClusterReport& report, const RunInfo& info) {
  nlohmann::json jobs = nlohmann::json::array();
  std::uint64_t retrans = 0, collisions = 0;
  for (const auto& j : report.jobs) {
    jobs.push_back({
        {"job", j.job},
        {"exact", j.exact},
        {"finished", j.finished},
        {"error", j.error},
        {"completion_time_s", static_cast<double>(j.completion_time) / kSecond},
        {"throughput_gbps", throughput_gbps(j)},
        {"steady_gbps", steady_gbps(j)},
        {"start_s", static_cast<double>(j.start) / kSecond},
        {"job_completion_time_s", static_cast<double>(j.completion_time - j.start) / kSecond},
        {"iterations_per_s", iterations_per_second(j)},
        // At full size: a model scaled down by s runs s times as many iterations per second.
        {"samples_per_s_per_worker",
         iterations_per_second(j) * j.samples_per_iteration / j.model_scale},
        {"fragments_sent", j.workers.fragments_sent},
        {"results", j.workers.results},
        {"done_copies", j.workers.done_copies},
        {"duplicate_results", j.workers.duplicate_results},
        {"retransmissions", engines::retransmissions(j.workers)},
        {"timeouts", j.workers.timeouts},
        {"fast_resends", j.workers.fast_resends},
        {"probes", j.workers.probes},
        {"ecn_marks", j.workers.ecn_marks},
        {"window_cuts", j.workers.window_cuts},
        {"deferred_gaps", j.workers.deferred_gaps},
        {"result_queries", j.workers.result_queries},
        {"lost_down_queries", j.workers.lost_down_queries},
        {"answered_queries", j.ps.answered_queries},
        {"late_asks_covered", j.ps.late_asks_covered},
        {"queries_over_budget", j.ps.queries_over_budget},
        {"fallback_resends", j.workers.fallback_resends},
        {"requested_resends", j.workers.requested_resends},
        {"resend_requests", j.ps.resend_requests},
        {"flushes", j.switches.flushes},
        {"late_results", j.ps.late_results},
        {"collisions", j.switches.collisions},
        {"borrowed", j.ps.borrowed},
        {"borrowed_collided", j.ps.borrowed_collided},
        {"home_collided", j.ps.home_collided},
        {"fraction_in_network", j.fraction_in_network},
        {"iterations", j.iterations},
        {"float_fallbacks", j.ps.float_fallbacks},
        {"ps_packets_in", j.ps.packets_in},
        {"ps_bytes_in", j.ps.bytes_in},
        {"results_checked", j.results_checked},
        {"mismatches", j.mismatches},
    });
    retrans += engines::retransmissions(j.workers);
    collisions += j.switches.collisions;
  }
  const double eps = info.wall_seconds > 0 ? static_cast<double>(report.events) / info.wall_seconds : 0;
  nlohmann::json out = {
      {"jobs", jobs},
      {"totals",
       {{"exact", report.all_exact()},
        {"retransmissions", retrans},
        {"collisions", collisions},
        {"simulated_time_s", static_cast<double>(report.end_time) / kSecond},
        {"packets_lost", report.links.lost},
        {"packets_tail_dropped", report.links.tail_dropped},
        {"ecn_marked", report.switches.ecn_marked}}},
      {"events", report.events},
      {"events_per_second", eps},
      {"wall_time_s", info.wall_seconds},
      {"trace_hash", fmt::format("{:016x}", report.trace_hash)},
  };
  if (!report.series.empty()) out["series"] = series_json(report);
  if (!info.scenario.is_null()) out["scenario"] = info.scenario;
  return out;
}

std::string to_table(const sim::ClusterReport& report, const RunInfo& info) {
  std::string out = fmt::format("{:>4} {:>6} {:>12} {:>10} {:>9} {:>9} {:>10} {:>7}\n", "job",
                                "exact", "finish (ms)", "Gbps", "in-net", "collide", "retransmit",
                                "floats");
  for (const auto& j : report.jobs) {
    out += fmt::format("{:>4} {:>6} {:>12.3f} {:>10.2f} {:>8.1f}% {:>9} {:>10} {:>7}\n", j.job,
                       j.exact ? "yes" : (j.finished ? "NO" : "unfin"),
                       static_cast<double>(j.completion_time) / kMillisecond, throughput_gbps(j),
                       100 * j.fraction_in_network, j.switches.collisions, engines::retransmissions(j.workers),
                       j.ps.float_fallbacks);
    if (!j.error.empty()) out += fmt::format("     error: {}\n", j.error);
  }
  out += fmt::format("{} events in {:.2f} s ({:.2f} M events/s), trace hash {:016x}\n",
                     report.events, info.wall_seconds,
                     info.wall_seconds > 0 ? report.events / info.wall_seconds / 1e6 : 0.0,
                     report.trace_hash);
  out += report.all_exact() ? "all results exact\n" : "NOT ALL RESULTS EXACT\n";
  if (!info.reproduce.empty()) out += "reproduce: " + info.reproduce + "\n";
  return out;
}

}  // namespace atp::apps
