#include "control/cluster_config.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <toml++/toml.h>

#include "proto/crc32.h"
#include "quant/quantizer.h"

namespace atp::control {

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw std::invalid_argument(origin + ": " + what);
}

template <typename T>
T number(const toml::table& t, const char* key, T fallback, const std::string& where) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  // Only an integer node is read as an integer: toml++ would cast a float node itself, which
  // is undefined for one beyond int64 (found by the config fuzzer: token = 2718E81).
  if (auto v = n->is_integer() ? n->value<std::int64_t>() : std::nullopt) {
    if (*v < 0) fail(where, std::string(key) + " must not be negative");
    if constexpr (std::is_integral_v<T>) {
      if (static_cast<std::uint64_t>(*v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        fail(where, std::string(key) + " is too large");
    }
    return static_cast<T>(*v);
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (auto v = n->value<double>()) return static_cast<T>(*v);
  } else {
    if (n->is_floating_point()) fail(where, std::string(key) + " must be an integer");
  }
  fail(where, std::string(key) + " must be a number");
}

std::string text(const toml::table& t, const char* key, const std::string& where,
                 bool required = true) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    if (required) fail(where, std::string("missing ") + key);
    return {};
  }
  auto v = n->value<std::string>();
  if (!v) fail(where, std::string(key) + " must be a string");
  return *v;
}

bool boolean(const toml::table& t, const char* key, bool fallback, const std::string& where) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return fallback;
  auto v = n->value<bool>();
  if (!v || !n->is_boolean()) fail(where, std::string(key) + " must be true or false");
  return *v;
}

const toml::array* array(const toml::table& root, const char* key) {
  const toml::node* n = root.get(key);
  return n ? n->as_array() : nullptr;
}

std::uint64_t mac_address(const std::string& text, const std::string& where) {
  unsigned b[6];
  char end = 0;
  if (text.size() != 17 ||
      std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &end) != 6)
    fail(where, "'" + text + "' is not a MAC address (aa:bb:cc:dd:ee:ff)");
  std::uint64_t mac = 0;
  for (unsigned byte : b) mac = (mac << 8) | byte;
  return mac;
}

std::uint32_t ipv4_address(const std::string& text, const std::string& where) {
  const auto e = runtime::Endpoint::parse(text + ":0");
  if (!e) fail(where, "'" + text + "' is not an IPv4 address");
  return e->ip;
}

// `loopback_ports = [ 152, 160 ]`: port numbers, none of them a port to a neighbour.
std::vector<std::uint16_t> parse_loopback_ports(const toml::node& node,
                                                const std::map<std::uint16_t, int>& wired,
                                                const std::string& where) {
  const auto* list = node.as_array();
  if (!list) fail(where, "loopback_ports must be a list of port numbers");
  std::vector<std::uint16_t> out;
  for (const auto& item : *list) {
    const auto v = item.is_integer() ? item.value<std::int64_t>() : std::nullopt;
    if (!v || *v < 0 || *v > 0xFFFF) fail(where, "loopback_ports must be a list of port numbers");
    const auto port = static_cast<std::uint16_t>(*v);
    if (wired.contains(port))
      fail(where, "port " + std::to_string(port) + " leads to a neighbour, so it cannot loop back");
    if (std::find(out.begin(), out.end(), port) != out.end())
      fail(where, "loopback port " + std::to_string(port) + " is listed twice");
    out.push_back(port);
  }
  return out;
}

// A P4 switch's `mac`, `ports = [ { port = 1, peer = "10.0.0.2", mac = "..." }, ... ]` and,
// on a Tofino, `loopback_ports`.
P4Wiring parse_p4_wiring(const toml::table& t, const std::string& where) {
  P4Wiring w;
  const std::string mac = text(t, "mac", where, false);
  const auto* ports = t.get("ports");
  if (mac.empty() != (ports == nullptr)) fail(where, "a P4 switch needs both `mac` and `ports`");
  const auto* loopback = t.get("loopback_ports");
  if (ports == nullptr && loopback != nullptr)
    fail(where, "loopback_ports is for a P4 switch: it needs `mac` and `ports` too");
  if (ports == nullptr) return w;
  w.mac = mac_address(mac, where + " mac");
  if (!ports->is_array()) fail(where, "ports must be [ { port = ..., peer = ..., mac = ... } ]");
  std::map<std::uint16_t, int> seen_ports;
  std::map<std::uint32_t, int> seen_peers;
  for (const auto& node : *ports->as_array()) {
    const auto* pt = node.as_table();
    if (!pt) fail(where, "each port must be { port = ..., peer = ..., mac = ... }");
    P4Port p;
    p.port = number<std::uint16_t>(*pt, "port", 0, where + " port");
    const std::string peer = text(*pt, "peer", where + " port " + std::to_string(p.port));
    p.peer_ip = ipv4_address(peer, where + " port " + std::to_string(p.port));
    p.peer_mac = mac_address(text(*pt, "mac", where + " port " + std::to_string(p.port)),
                             where + " port " + std::to_string(p.port));
    if (++seen_ports[p.port] > 1) fail(where, "port " + std::to_string(p.port) + " is listed twice");
    if (++seen_peers[p.peer_ip] > 1) fail(where, "peer " + peer + " is behind two ports");
    w.ports.push_back(p);
  }
  if (loopback != nullptr) w.loopback_ports = parse_loopback_ports(*loopback, seen_ports, where);
  return w;
}

}  // namespace

ClusterConfig ClusterConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse(buffer.str(), path);
}

namespace {

const toml::table& entry_table(const toml::node& node, const std::string& origin,
                               const char* kind) {
  const auto* t = node.as_table();
  if (!t) fail(origin, std::string("[[") + kind + "]] entries must be tables");
  return *t;
}

SwitchSpec parse_switch(const toml::table& t, const std::string& origin) {
  SwitchSpec s;
  s.name = text(t, "name", origin + " [[switch]]");
  const std::string where = origin + " switch '" + s.name + "'";
  s.address = runtime::Endpoint::parse_or_throw(text(t, "address", where), where + " address");
  const auto level = number<int>(t, "level", 1, where);
  if (level != 1 && level != 2) fail(where, "level must be 1 or 2");
  s.level = static_cast<proto::Level>(level);
  s.aggregators = number<std::uint32_t>(t, "aggregators", 1024, where);
  s.values_per_aggregator = number<std::uint16_t>(t, "values_per_aggregator", 256, where);
  if (s.values_per_aggregator == 0 || s.values_per_aggregator > proto::kMaxValues)
    fail(where, "values_per_aggregator must be 1..1024");
  s.passes = number<std::uint8_t>(t, "passes", 1, where);
  if (s.passes == 0 || s.values_per_aggregator % s.passes != 0)
    fail(where, "passes must divide values_per_aggregator");
  const std::string policy = text(t, "policy", where, false);
  if (!policy.empty() && !engines::parse_policy(policy, s.policy))
    fail(where, "policy must be atp, static or none");
  s.uplink = text(t, "uplink", where, false);
  s.threads = number<unsigned>(t, "threads", 1, where);
  if (s.threads == 0 || s.threads > 64) fail(where, "threads must be 1..64");
  if (s.threads > 1 && s.address.port == 0) fail(where, "threads > 1 needs a fixed port");
  if (s.aggregators < s.threads && s.policy != engines::Policy::none)
    fail(where, "needs at least one aggregator per thread");
  // The register arrays are allocated up front: 256 MiB of values is far beyond any switch
  // (a Tofino holds a few MB), and a typo must not exhaust the host's memory.
  if (std::uint64_t{s.aggregators} * s.values_per_aggregator * 4 > (std::uint64_t{1} << 28))
    fail(where, "aggregators x values_per_aggregator x 4 bytes must be at most 256 MiB");
  if (std::uint32_t{s.address.port} + s.threads > 65536) fail(where, "ports beyond 65535");
  s.ecn_backlog_bytes = number<std::uint32_t>(t, "ecn_backlog_bytes", s.ecn_backlog_bytes, where);
  s.ecn_receive_backlog_bytes =
      number<std::uint32_t>(t, "ecn_receive_backlog_bytes", s.ecn_receive_backlog_bytes, where);
  s.p4 = parse_p4_wiring(t, where);
  s.control = text(t, "control", where, false);
  return s;
}

ServerSpec parse_server(const toml::table& t, const std::string& origin) {
  ServerSpec s;
  s.name = text(t, "name", origin + " [[ps]]");
  const std::string where = origin + " ps '" + s.name + "'";
  s.address = runtime::Endpoint::parse_or_throw(text(t, "address", where), where + " address");
  s.control = text(t, "control", where, false);
  s.memory_budget_mb = number<std::uint64_t>(t, "memory_budget_mb", 0, where);
  if (s.memory_budget_mb > (std::uint64_t{1} << 40))
    fail(where, "memory_budget_mb must be at most 2^40 (a mebibyte count)");
  return s;
}

std::vector<WorkerSpec> parse_workers(const toml::table& t, const std::string& where) {
  const auto* workers = t.get_as<toml::array>("workers");
  if (!workers) fail(where, "missing workers = [ { rack = ..., address = ... }, ... ]");
  std::vector<WorkerSpec> out;
  for (const auto& w : *workers) {
    const auto* wt = w.as_table();
    if (!wt) fail(where, "each worker must be { rack = ..., address = ... }");
    WorkerSpec spec;
    spec.rack = text(*wt, "rack", where + " worker");
    spec.address = runtime::Endpoint::parse_or_throw(text(*wt, "address", where + " worker"),
                                                    where + " worker address");
    out.push_back(spec);
  }
  return out;
}

JobConfig parse_job(const toml::table& t, const std::string& origin) {
  JobConfig j;
  j.id = number<std::uint32_t>(t, "id", 0, origin + " [[job]]");
  const std::string where = origin + " job " + std::to_string(j.id);
  j.window = number<std::uint32_t>(t, "window", 64, where);
  j.ring = number<std::uint32_t>(t, "ring", 0, where);
  j.congestion_control = boolean(t, "congestion_control", true, where);
  j.aggregator_window = boolean(t, "aggregator_window", false, where);
  j.borrow_aggregators = boolean(t, "borrow_aggregators", false, where);
  if (t.get("placement") != nullptr &&
      !engines::parse_placement(text(t, "placement", where), j.placement))
    fail(where, "placement must be \"planned\", \"hash\" or \"linear\"");
  j.initial_window = number<std::uint32_t>(t, "initial_window", j.initial_window, where);
  j.values_per_packet = number<std::uint16_t>(t, "values_per_packet", 256, where);
  j.scale = number<float>(t, "scale", 0.0f, where);
  j.max_gradient = number<float>(t, "max_gradient", 1.0f, where);
  const auto deadline_ms = number<Duration>(t, "deadline_ms", 30000, where);
  if (deadline_ms == 0 || deadline_ms > 24 * 3600 * 1000) fail(where, "deadline_ms must be 1..86400000");
  j.deadline = deadline_ms * kMillisecond;
  const auto token = number<std::uint64_t>(t, "token", 0, where);
  if (token > 0xFFFFFFFFu) fail(where, "token must fit 32 bits");
  j.token = static_cast<std::uint32_t>(token);
  j.static_aggregators = number<std::uint32_t>(t, "static_aggregators", 0, where);
  j.home_first = number<std::uint32_t>(t, "home_first", 0, where);
  j.home_count = number<std::uint32_t>(t, "home_count", 0, where);
  if (const auto* servers = t.get_as<toml::array>("parameter_servers"))
    for (const auto& s : *servers)
      if (auto name = s.value<std::string>()) j.parameter_servers.push_back(*name);
  j.workers = parse_workers(t, where);
  return j;
}

toml::table parse_toml(const std::string& toml_text, const std::string& origin) {
  try {
    return toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << e.description() << " (line " << e.source().begin.line << ")";
    fail(origin, msg.str());
  }
}

std::vector<JobConfig> parse_jobs(const toml::table& root, const std::string& origin) {
  std::vector<JobConfig> jobs;
  if (const auto* entries = array(root, "job"))
    for (const auto& node : *entries) jobs.push_back(parse_job(entry_table(node, origin, "job"), origin));
  return jobs;
}

}  // namespace

ClusterConfig ClusterConfig::parse(const std::string& toml_text, const std::string& origin) {
  const toml::table root = parse_toml(toml_text, origin);
  std::vector<SwitchSpec> switches;
  std::vector<ServerSpec> servers;
  std::vector<JobConfig> jobs;
  if (const auto* entries = array(root, "switch"))
    for (const auto& node : *entries)
      switches.push_back(parse_switch(entry_table(node, origin, "switch"), origin));
  if (const auto* entries = array(root, "ps"))
    for (const auto& node : *entries)
      servers.push_back(parse_server(entry_table(node, origin, "ps"), origin));
  return from_parts(std::move(switches), std::move(servers), parse_jobs(root, origin), origin);
}

ClusterConfig ClusterConfig::with_jobs_from(const std::string& jobs_toml,
                                            const std::string& origin) const {
  const toml::table root = parse_toml(jobs_toml, origin);
  for (const auto& [key, node] : root)
    if (key.str() != "job") fail(origin, "only [[job]] tables belong here, not '" + std::string(key.str()) + "'");
  return from_parts(switches_, servers_, parse_jobs(root, origin), origin);
}

std::string default_control_socket(const std::string& name) { return "/tmp/atp-" + name + ".sock"; }

std::string job_toml(const JobConfig& job) {
  toml::array servers, workers;
  for (const auto& ps : job.parameter_servers) servers.push_back(ps);
  for (const auto& w : job.workers)
    workers.push_back(toml::table{{"rack", w.rack}, {"address", w.address.str()}});
  toml::table t{{"id", job.id},
                {"window", job.window},
                {"ring", job.ring},
                {"congestion_control", job.congestion_control},
                {"aggregator_window", job.aggregator_window},
                {"borrow_aggregators", job.borrow_aggregators},
                {"placement", engines::to_string(job.placement)},
                {"initial_window", job.initial_window},
                {"values_per_packet", job.values_per_packet},
                {"scale", static_cast<double>(job.scale)},
                {"max_gradient", static_cast<double>(job.max_gradient)},
                {"deadline_ms", job.deadline / kMillisecond},
                {"token", job.token},
                {"static_aggregators", job.static_aggregators},
                {"home_first", job.home_first},
                {"home_count", job.home_count},
                {"parameter_servers", servers},
                {"workers", workers}};
  std::ostringstream out;
  out << toml::table{{"job", toml::array{t}}} << "\n";
  return out.str();
}

ClusterConfig ClusterConfig::from_parts(std::vector<SwitchSpec> switches,
                                        std::vector<ServerSpec> servers,
                                        std::vector<JobConfig> jobs, const std::string& origin) {
  ClusterConfig c;
  c.switches_ = std::move(switches);
  c.servers_ = std::move(servers);
  c.jobs_ = std::move(jobs);
  for (auto& s : c.switches_)
    if (s.control.empty()) s.control = default_control_socket(s.name);
  for (auto& s : c.servers_)
    if (s.control.empty()) s.control = default_control_socket(s.name);
  c.validate(origin);
  return c;
}

void ClusterConfig::validate(const std::string& origin) const {
  std::map<std::string, int> names;
  for (const auto& s : switches_) ++names[s.name];
  for (const auto& s : servers_) ++names[s.name];
  for (const auto& [name, count] : names)
    if (count > 1) fail(origin, "name '" + name + "' is used more than once");
  for (const auto& s : switches_) {
    if (!s.uplink.empty() && switch_named(s.uplink).level != proto::Level::spine)
      fail(origin, "switch '" + s.name + "': uplink '" + s.uplink + "' is not a level-2 switch");
    if (s.level == proto::Level::spine && !s.uplink.empty())
      fail(origin, "switch '" + s.name + "': a level-2 switch has no uplink");
  }
  std::map<std::uint32_t, int> ids;
  for (const auto& j : jobs_) {
    const std::string where = "job " + std::to_string(j.id);
    if (++ids[j.id] > 1) fail(origin, where + " is defined twice");
    if (j.id > engines::kMaxSwitchJobId)
      fail(origin, where + ": job ids are 0.." + std::to_string(engines::kMaxSwitchJobId));
    if (j.window == 0 || !std::has_single_bit(j.window)) fail(origin, where + ": window must be a power of two");
    if (!valid_ring(j.window, j.ring))
      fail(origin, where + ": ring must be a power of two from window up to 2^20 (or 0)");
    if (j.values_per_packet == 0 || j.values_per_packet > proto::kMaxValues)
      fail(origin, where + ": values_per_packet must be 1..1024");
    if (j.workers.empty()) fail(origin, where + ": no workers");
    if (j.parameter_servers.empty()) fail(origin, where + ": no parameter_servers");
    for (const auto& p : j.parameter_servers) server_named(p);
    for (const auto& w : j.workers)
      if (switch_named(w.rack).level != proto::Level::rack)
        fail(origin, where + ": worker rack '" + w.rack + "' is not a level-1 switch");
    const Placement p = placement(j);
    if (p.racks.size() > proto::kMaxFanIn) fail(origin, where + ": more than 32 racks");
    for (auto n : p.workers_per_rack)
      if (n > proto::kMaxFanIn) fail(origin, where + ": more than 32 workers in one rack");
    if (p.racks.size() > 1 && spine_of(j) == nullptr)
      fail(origin, where + ": workers in several racks need their rack switches to share a "
                           "level-2 uplink");
    for (const auto& s : switches_)
      if (j.static_aggregators > s.aggregators / s.threads && serves(s, j))
        fail(origin, where + ": static_aggregators beyond switch '" + s.name + "'s pool per thread");
    // A fragment longer than an aggregator passes the switch unaggregated (to the PS): a job
    // whose every fragment would is a mistake to refuse, not to run at PS-only speed.
    for (const auto& s : switches_)  // (a one-rack job's sums pass its spine unaggregated)
      if (s.policy != engines::Policy::none && serves(s, j) &&
          (s.level == proto::Level::rack || p.racks.size() > 1) &&
          j.values_per_packet > s.values_per_aggregator)
        fail(origin, where + ": values_per_packet " + std::to_string(j.values_per_packet) +
                         " is more than switch '" + s.name + "' aggregates (values_per_aggregator " +
                         std::to_string(s.values_per_aggregator) +
                         "): every fragment would pass it unaggregated; use at most that");
    for (const auto& s : switches_)
      if (j.home_count > 0 && s.policy == engines::Policy::atp && serves(s, j) &&
          std::uint64_t{j.home_first} + j.home_count > s.aggregators / s.threads)
        fail(origin, where + ": home_first + home_count beyond switch '" + s.name +
                         "'s pool per thread");
  }
  validate_static_slices(origin);
}

// Under the static policy, each switch thread's pool must hold the slices its jobs name. (Jobs
// naming none share what is left; a share of 0 sends all of their fragments to the PS.)
void ClusterConfig::validate_static_slices(const std::string& origin) const {
  for (const auto& s : switches_) {
    if (s.policy != engines::Policy::static_partition) continue;
    const std::uint32_t pool = s.aggregators / s.threads;
    for (unsigned t = 0; t < s.threads; ++t) {
      std::uint64_t named = 0;
      for (const auto& j : jobs_)
        if (serves(s, j) && thread_of(s.name, j.id) == t) named += j.static_aggregators;
      if (named > pool)
        fail(origin, "switch '" + s.name + "': its jobs' static slices do not fit its pool of " +
                         std::to_string(pool) + " aggregators per thread");
    }
  }
}

const SwitchSpec& ClusterConfig::switch_named(const std::string& name) const {
  for (const auto& s : switches_)
    if (s.name == name) return s;
  throw std::invalid_argument("no switch named '" + name + "'");
}

const ServerSpec& ClusterConfig::server_named(const std::string& name) const {
  for (const auto& s : servers_)
    if (s.name == name) return s;
  throw std::invalid_argument("no parameter server named '" + name + "'");
}

const JobConfig& ClusterConfig::job(std::uint32_t id) const {
  for (const auto& j : jobs_)
    if (j.id == id) return j;
  throw std::invalid_argument("no job " + std::to_string(id));
}

ClusterConfig::Placement ClusterConfig::placement(const JobConfig& job) const {
  Placement p;
  for (const auto& w : job.workers) {
    auto it = std::find(p.racks.begin(), p.racks.end(), w.rack);
    if (it == p.racks.end()) {
      p.racks.push_back(w.rack);
      p.workers_per_rack.push_back(0);
      it = p.racks.end() - 1;
    }
    const auto rack = static_cast<std::uint8_t>(it - p.racks.begin());
    p.rack_of.push_back(rack);
    p.rank_in_rack.push_back(p.workers_per_rack[rack]++);
  }
  return p;
}

// The level-2 switch every rack of the job goes through, or null if they go to the PSs direct.
const SwitchSpec* ClusterConfig::spine_of(const JobConfig& job) const {
  const Placement p = placement(job);
  const std::string& uplink = switch_named(p.racks[0]).uplink;
  for (const auto& rack : p.racks)
    if (switch_named(rack).uplink != uplink) return nullptr;
  return uplink.empty() ? nullptr : &switch_named(uplink);
}

const std::string& ClusterConfig::top_switch(std::uint32_t id) const {
  const JobConfig& j = job(id);
  if (const SwitchSpec* spine = spine_of(j)) return spine->name;
  return switch_named(j.workers.front().rack).name;
}

// Results leave the PS toward the switch that fans them out to the whole job.
runtime::Endpoint ClusterConfig::results_via(const JobConfig& job) const {
  return address_for(top_switch(job.id), job.id);
}

float ClusterConfig::scale_of(const JobConfig& job) const {
  if (job.scale > 0) return job.scale;
  return quant::choose_scale(job.max_gradient, static_cast<int>(job.workers.size()));
}

// Every number the job's parties must agree on, folded into the token they carry: a worker or
// daemon started from a file that differs in any of them (another scale would make a
// meaningless sum, another K or membership a stuck one) is dropped as `forged` everywhere and
// its job fails at the deadline with an error, instead of summing wrongly.
std::uint32_t ClusterConfig::wire_token(std::uint32_t id) const {
  const JobConfig& j = job(id);
  const float scale = scale_of(j);
  std::uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  std::string shape = std::to_string(j.id) + '|' + std::to_string(j.window) + '|' +
                      std::to_string(ring_or_default(j.window, j.ring)) + '|' +
                      std::to_string(j.values_per_packet) + '|' + std::to_string(scale_bits);
  for (const auto& ps : j.parameter_servers) shape += '|' + ps + '@' + server_named(ps).address.str();
  for (const auto& w : j.workers) shape += '|' + w.rack + '@' + w.address.str();
  return j.token ^ proto::crc32(reinterpret_cast<const std::uint8_t*>(shape.data()), shape.size());
}

bool ClusterConfig::serves(const SwitchSpec& s, const JobConfig& job) const {
  if (s.level == proto::Level::rack) {
    for (const auto& w : job.workers)
      if (w.rack == s.name) return true;
    return false;
  }
  const SwitchSpec* spine = spine_of(job);
  return spine != nullptr && spine->name == s.name;
}

// By job id alone, so a job keeps its shard when other jobs come and go (`atp ctl admit`
// with an edited file).
unsigned ClusterConfig::thread_of(const std::string& name, std::uint32_t job) const {
  return job % switch_named(name).threads;
}

runtime::Endpoint ClusterConfig::address_for(const std::string& name, std::uint32_t job) const {
  runtime::Endpoint e = switch_named(name).address;
  e.port = static_cast<std::uint16_t>(e.port + thread_of(name, job));
  return e;
}

engines::SwitchConfig ClusterConfig::switch_config(const std::string& name) const {
  const SwitchSpec& s = switch_named(name);
  return {s.level, s.aggregators / s.threads,
          static_cast<std::uint16_t>(s.values_per_aggregator / s.passes), s.policy, s.passes};
}

namespace {
// One switch thread's pool in runs, in job order: a job naming `static_aggregators` gets that
// many, the others equal shares of the rest (validate_static_slices() checked that they fit).
void cut_static_slices(std::uint32_t pool, const std::vector<engines::SwitchJob*>& jobs) {
  std::uint32_t named = 0, unnamed = 0;
  for (const auto* j : jobs) (j->static_count > 0 ? named += j->static_count : ++unnamed);
  const std::uint32_t share = unnamed == 0 ? 0 : (pool - std::min(named, pool)) / unnamed;
  std::uint32_t first = 0;
  for (auto* j : jobs) {
    if (j->static_count == 0) j->static_count = share;
    j->static_first = first;
    first += j->static_count;
  }
}
}  // namespace

std::vector<engines::SwitchJob> ClusterConfig::switch_jobs(const std::string& name,
                                                           runtime::AddressBook& book) const {
  const SwitchSpec& me = switch_named(name);
  std::vector<engines::SwitchJob> out;
  for (const JobConfig& job : jobs_) {
    const Placement p = placement(job);
    engines::SwitchJob sj;
    sj.job = job.id;
    sj.token = wire_token(job.id);
    sj.window = job.window;
    sj.multicast_group = engines::multicast_group_of_job(job.id);
    sj.static_count = job.static_aggregators;
    auto port = [&](const runtime::Endpoint& e) { return engines::port_of_node(book.id_of(e)); };
    std::vector<engines::Port> servers;
    for (const auto& ps : job.parameter_servers) servers.push_back(port(server_named(ps).address));
    if (me.level == proto::Level::rack) {
      auto it = std::find(p.racks.begin(), p.racks.end(), name);
      if (it == p.racks.end()) continue;
      const auto rack = static_cast<std::size_t>(it - p.racks.begin());
      for (std::size_t w = 0; w < job.workers.size(); ++w)
        if (p.rack_of[w] == rack) sj.downstream.push_back(port(job.workers[w].address));
      sj.upstream = me.uplink.empty()
                        ? servers
                        : std::vector<engines::Port>{port(address_for(me.uplink, job.id))};
      sj.fan_in = p.workers_per_rack[rack];
    } else {
      const SwitchSpec* spine = spine_of(job);
      if (spine == nullptr || spine->name != name) continue;
      for (const auto& rack : p.racks) sj.downstream.push_back(port(address_for(rack, job.id)));
      sj.upstream = servers;
      sj.fan_in = static_cast<std::uint8_t>(p.racks.size());
    }
    out.push_back(sj);
  }
  // Static policy: each thread's pool in equal slices for its jobs, in job order.
  for (unsigned t = 0; t < me.threads; ++t) {
    std::vector<engines::SwitchJob*> mine;
    for (auto& sj : out)
      if (thread_of(name, sj.job) == t) mine.push_back(&sj);
    if (mine.empty()) continue;
    cut_static_slices(me.aggregators / me.threads, mine);
  }
  return out;
}

// The home the job's PSs plan over: its slice of the largest pool among its racks' switches
// under the dynamic policy (the others ignore the aggregator a fragment names); none if none.
engines::HomeSlice ClusterConfig::home_of(const JobConfig& job, std::uint32_t* pool) const {
  engines::HomeSlice home;
  // Home turns alone are the same whoever computes them: every PS shard plans over the whole
  // home. Borrowing is each shard's own: then each plans over its share (worker and PS alike).
  home.shards = job.borrow_aggregators ? static_cast<std::uint32_t>(job.parameter_servers.size())
                                       : 1;
  std::uint32_t largest = 0;
  for (const auto& rack : placement(job).racks) {
    const SwitchSpec& s = switch_named(rack);
    if (s.policy != engines::Policy::atp || s.aggregators / s.threads <= largest) continue;
    largest = s.aggregators / s.threads;
    const Slice slice = job.home_count > 0 ? Slice{job.home_first, job.home_count}
                                           : home_slice(rack, job.id);
    home.first = slice.first;
    home.count = slice.count;
  }
  if (pool) *pool = largest;
  return home;
}

Slice ClusterConfig::home_slice(const std::string& name, std::uint32_t id) const {
  const SwitchSpec& s = switch_named(name);
  const unsigned thread = thread_of(name, id);
  std::vector<engines::SwitchJob> mine;
  for (const JobConfig& j : jobs_) {
    if (!serves(s, j) || thread_of(name, j.id) != thread) continue;
    mine.push_back({});
    mine.back().job = j.id;
    mine.back().static_count = j.static_aggregators;
  }
  std::vector<engines::SwitchJob*> cut;
  for (auto& j : mine) cut.push_back(&j);
  cut_static_slices(s.aggregators / s.threads, cut);
  for (const auto& j : mine)
    if (j.job == id) return {j.static_first, j.static_count};
  throw std::invalid_argument("switch '" + name + "' does not serve job " + std::to_string(id));
}

std::vector<engines::PsJob> ClusterConfig::server_jobs(const std::string& name,
                                                       runtime::AddressBook& book) const {
  server_named(name);
  std::vector<engines::PsJob> out;
  for (const JobConfig& job : jobs_) {
    auto it = std::find(job.parameter_servers.begin(), job.parameter_servers.end(), name);
    if (it == job.parameter_servers.end()) continue;
    const Placement p = placement(job);
    engines::PsJob pj;
    pj.job = job.id;
    pj.workers_per_rack = p.workers_per_rack;
    pj.window = job.window;
    pj.ring = job.ring;
    pj.values_per_packet = job.values_per_packet;
    pj.downstream = book.id_of(results_via(job));
    pj.ps_index = static_cast<std::uint8_t>(it - job.parameter_servers.begin());
    pj.parameter_servers = static_cast<std::uint32_t>(job.parameter_servers.size());
    pj.home = home_of(job, &pj.pool_size);
    pj.borrow = job.borrow_aggregators;
    pj.token = wire_token(job.id);
    out.push_back(pj);
  }
  return out;
}

std::vector<proto::ResultOwner> ClusterConfig::rank_positions(std::uint32_t id) const {
  const Placement p = placement(job(id));
  std::vector<proto::ResultOwner> out;
  for (std::size_t rank = 0; rank < p.rack_of.size(); ++rank)
    out.push_back({p.rack_of[rank], p.rank_in_rack[rank]});
  return out;
}

engines::WorkerConfig ClusterConfig::worker_config(std::uint32_t id, std::size_t rank,
                                                   runtime::AddressBook& book,
                                                   engines::WorkerConfig base) const {
  const JobConfig& job = this->job(id);
  if (rank >= job.workers.size())
    throw std::invalid_argument("job " + std::to_string(id) + " has " +
                                std::to_string(job.workers.size()) + " workers; no rank " +
                                std::to_string(rank));
  const Placement p = placement(job);
  engines::WorkerConfig c = std::move(base);
  c.job = job.id;
  c.rack = p.rack_of[rank];
  c.rank_in_rack = p.rank_in_rack[rank];
  c.rack_fan_in = p.workers_per_rack[c.rack];
  c.job_fan_in = static_cast<std::uint8_t>(p.racks.size());
  c.job_workers = static_cast<std::uint16_t>(job.workers.size());
  c.values_per_packet = job.values_per_packet;
  c.window = job.window;
  c.ring = job.ring;
  c.congestion_control = job.congestion_control;
  c.aggregator_window = job.aggregator_window;
  c.placement = job.placement;
  c.home = home_of(job);
  c.initial_window = job.initial_window;
  c.scale = scale_of(job);
  c.parameter_servers = static_cast<std::uint8_t>(job.parameter_servers.size());
  c.uplink = book.id_of(address_for(job.workers[rank].rack, job.id));
  c.deadline = job.deadline;
  c.token = wire_token(job.id);
  return c;
}

}  // namespace atp::control
