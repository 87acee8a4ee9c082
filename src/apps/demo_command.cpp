// `atp demo`: a whole ATP cluster on loopback, as real processes. It writes a cluster file,
// starts a switch, one parameter server per job and 2 jobs x 4 workers (`atp worker`), each
// allreducing random gradients and checking every result against the exact sum; then it prints
// per job: exact or not, throughput, share aggregated in the switch, collisions, retransmissions.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "apps/commands.h"
#include "runtime/udp_socket.h"

extern char** environ;

namespace atp::apps {

namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  unsigned jobs = 2, workers = 4, iterations = 4;
  std::size_t floats = 2 << 20;
  std::uint32_t aggregators = 96;
  bool json = false;
  std::string keep;
};

// A free loopback UDP port: bind to port 0, read what the kernel chose, release it.
std::uint16_t free_port() {
  runtime::UdpSocket probe(*runtime::Endpoint::parse("127.0.0.1:0"));
  return probe.local().port;
}

pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) throw std::runtime_error("cannot start " + args[1] + ": " + std::strerror(rc));
  return pid;
}

std::string write_cluster(const DemoOptions& o, const fs::path& dir) {
  std::string toml = fmt::format(
      "# Written by `atp demo`: one rack switch shared by {} jobs, one PS per job.\n"
      "[[switch]]\nname = \"rack0\"\naddress = \"127.0.0.1:{}\"\nlevel = 1\naggregators = {}\n\n",
      o.jobs, free_port(), o.aggregators);
  for (unsigned j = 1; j <= o.jobs; ++j)
    toml += fmt::format("[[ps]]\nname = \"ps{}\"\naddress = \"127.0.0.1:{}\"\n\n", j, free_port());
  for (unsigned j = 1; j <= o.jobs; ++j) {
    toml += fmt::format("[[job]]\nid = {}\nwindow = 64\ntoken = {}\nparameter_servers = [\"ps{}\"]\nworkers = [\n",
                        j, std::random_device{}(), j);
    for (unsigned w = 0; w < o.workers; ++w)
      toml += fmt::format("  {{ rack = \"rack0\", address = \"127.0.0.1:{}\" }},\n", free_port());
    toml += "]\n\n";
  }
  const fs::path path = dir / "cluster.toml";
  std::ofstream(path) << toml;
  return path;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (...) {
    return nullptr;
  }
}

unsigned read_progress(const fs::path& p) {
  std::ifstream in(p);
  unsigned n = 0;
  in >> n;
  return n;
}

fs::path demo_directory(const DemoOptions& o) {
  std::string pattern = "/tmp/atp-demo-XXXXXX";
  if (o.keep.empty() && ::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a directory under /tmp: " + std::string(std::strerror(errno)));
  const fs::path dir = o.keep.empty() ? fs::path(pattern) : fs::path(o.keep);
  fs::create_directories(dir);
  return dir;
}

const std::string kExe = "atp";

std::vector<pid_t> start_daemons(const DemoOptions& o, const fs::path& dir, const std::string& config) {
  std::vector<pid_t> daemons;
  daemons.push_back(spawn({kExe, "switch", "--config", config, "--name", "rack0", "--stats-json",
                           dir / "switch.json"}, dir / "switch.log"));
  for (unsigned j = 1; j <= o.jobs; ++j)
    daemons.push_back(spawn({kExe, "ps", "--config", config, "--name", fmt::format("ps{}", j),
                             "--stats-json", dir / fmt::format("ps{}.json", j)},
                            dir / fmt::format("ps{}.log", j)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return daemons;
}

std::vector<pid_t> start_workers(const DemoOptions& o, const fs::path& dir, const std::string& config) {
  std::vector<pid_t> workers;
  for (unsigned j = 1; j <= o.jobs; ++j)
    for (unsigned w = 0; w < o.workers; ++w) {
      const std::string tag = fmt::format("job{}-rank{}", j, w);
      workers.push_back(spawn({kExe, "worker", "--config", config, "--job", std::to_string(j),
                               "--rank", std::to_string(w), "--floats", std::to_string(o.floats),
                               "--iterations", std::to_string(o.iterations), "--seed",
                               std::to_string(j), "--json-out", dir / (tag + ".json"),
                               "--progress-file", dir / (tag + ".progress")},
                              dir / (tag + ".log")));
    }
  return workers;
}

// Waits for every worker, drawing a progress bar on a terminal.
void wait_for_workers(const DemoOptions& o, const fs::path& dir, std::vector<pid_t> workers) {
  const unsigned goal = o.iterations * o.jobs * o.workers;
  std::size_t running = workers.size();
  const bool bar = !o.json && ::isatty(STDERR_FILENO);
  while (running > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (pid_t& pid : workers)
      if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = 0;
        --running;
      }
    if (!bar) continue;
    unsigned done = 0;
    for (unsigned j = 1; j <= o.jobs; ++j)
      for (unsigned w = 0; w < o.workers; ++w)
        done += read_progress(dir / fmt::format("job{}-rank{}.progress", j, w));
    const unsigned width = 40, filled = width * done / goal;
    std::cerr << fmt::format("\r[{}{}] {}/{} worker iterations", std::string(filled, '#'),
                             std::string(width - filled, ' '), done, goal)
              << std::flush;
  }
  if (bar) std::cerr << "\n";
}

// One job's line of the report, from its workers', its PS's and the switch's JSON.
nlohmann::json job_report(const DemoOptions& o, const fs::path& dir, unsigned j,
                          const nlohmann::json& sw) {
  bool exact = true;
  double gbps = 0;
  std::uint64_t retransmissions = 0;
  std::string error;
  for (unsigned w = 0; w < o.workers; ++w) {
    const nlohmann::json r = read_json(dir / fmt::format("job{}-rank{}.json", j, w));
    if (r.is_null()) {
      exact = false;
      error = fmt::format("worker {} wrote no report (see its log)", w);
      continue;
    }
    exact &= r["exact"].get<bool>();
    gbps += r["throughput_gbps"].get<double>() / o.workers;
    retransmissions += r["retransmissions"].get<std::uint64_t>();
    if (!r["error"].get<std::string>().empty()) error = r["error"];
  }
  const nlohmann::json ps = read_json(dir / fmt::format("ps{}.json", j));
  const std::string id = std::to_string(j);
  const double completed = ps.is_null() ? 0 : ps["jobs"][id]["completed"].get<double>();
  const double in_network = ps.is_null() ? 0 : ps["jobs"][id]["completed_in_network"].get<double>();
  return {{"job", j},
          {"exact", exact},
          {"throughput_gbps", gbps},
          {"fraction_in_network", completed > 0 ? in_network / completed : 0},
          {"collisions", sw.is_null() ? 0 : sw["jobs"][id]["collisions"].get<std::uint64_t>()},
          {"retransmissions", retransmissions},
          {"error", error}};
}

void print_table(const nlohmann::json& report) {
  std::cout << fmt::format("{:>4} {:>6} {:>16} {:>8} {:>10} {:>11}\n", "job", "exact",
                           "Gbit/s/worker", "in-net", "collisions", "retransmit");
  for (const auto& j : report["jobs"]) {
    std::cout << fmt::format("{:>4} {:>6} {:>16.3f} {:>7.1f}% {:>10} {:>11}\n", j["job"].get<unsigned>(),
                             j["exact"].get<bool>() ? "yes" : "NO", j["throughput_gbps"].get<double>(),
                             100 * j["fraction_in_network"].get<double>(),
                             j["collisions"].get<std::uint64_t>(), j["retransmissions"].get<std::uint64_t>());
    if (!j["error"].get<std::string>().empty()) std::cout << "     error: " << j["error"].get<std::string>() << "\n";
  }
  std::cout << (report["exact"].get<bool>() ? "every result of every worker is exact\n"
                                            : "NOT ALL RESULTS EXACT\n");
}

void run_demo(const DemoOptions& o) {
  const fs::path dir = demo_directory(o);
  const std::string config = write_cluster(o, dir);
  const double total_mib = 4.0 * o.floats * o.iterations * o.jobs * o.workers / (1 << 20);
  if (!o.json)
    std::cout << fmt::format("ATP demo on loopback: {} jobs x {} workers, {:.0f} MiB of gradients, "
                             "one switch with {} aggregators (fewer than the jobs' windows), "
                             "files in {}\n", o.jobs, o.workers, total_mib, o.aggregators, dir.string());
  const std::vector<pid_t> daemons = start_daemons(o, dir, config);
  wait_for_workers(o, dir, start_workers(o, dir, config));
  for (pid_t pid : daemons) ::kill(pid, SIGTERM);
  for (pid_t pid : daemons) ::waitpid(pid, nullptr, 0);

  const nlohmann::json sw = read_json(dir / "switch.json");
  nlohmann::json report = {{"directory", dir.string()}, {"jobs", nlohmann::json::array()}};
  bool all_exact = true;
  for (unsigned j = 1; j <= o.jobs; ++j) {
    report["jobs"].push_back(job_report(o, dir, j, sw));
    all_exact &= report["jobs"].back()["exact"].get<bool>();
  }
  report["exact"] = all_exact;
  if (o.json)
    std::cout << report.dump(2) << "\n";
  else
    print_table(report);
  if (o.keep.empty() && all_exact) fs::remove_all(dir);
  set_exit_code(all_exact ? 0 : 1);
}

}  // namespace

void add_demo_command(CLI::App& app) {
  static DemoOptions o;
  auto* cmd = app.add_subcommand(
      "demo", "Run switch, parameter servers and 2 jobs x 4 workers on loopback; check exactness");
  cmd->add_option("--jobs", o.jobs, "Jobs")->capture_default_str()->check(CLI::Range(1, 16));
  cmd->add_option("--workers", o.workers, "Workers per job")->capture_default_str()->check(CLI::Range(1, 32));
  cmd->add_option("--floats", o.floats, "Floats per gradient tensor")->capture_default_str();
  cmd->add_option("--iterations", o.iterations, "Iterations")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--aggregators", o.aggregators, "Aggregators in the switch")->capture_default_str();
  cmd->add_option("--keep", o.keep, "Keep configs, logs and reports in this directory");
  cmd->add_flag("--json", o.json, "Print one JSON object instead of a table");
  cmd->callback([] { run_demo(o); });
}

}  // namespace atp::apps
