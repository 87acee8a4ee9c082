// `atp p4 agent` against a fake simple_switch_CLI that keeps tables, multicast groups and the
// claim register as BMv2 does (a duplicate key or an unknown handle is refused): what the agent
// adds at start, admits and removes leaves the switch exactly as the jobs present say.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "daemons/p4_switch_agent.h"
#include "daemons/tofino_switch_agent.h"
#include "runtime/event_loop.h"

namespace atp::daemons {
namespace {

// The switch's state as the CLI changes it, kept by the test after the agent owns the CLI.
struct FakeSwitch {
  std::map<std::string, std::string> defaults;                       // table -> command
  std::map<std::string, std::map<std::uint64_t, std::string>> tables;  // table -> handle -> key
  std::map<std::string, std::uint64_t> next_handle;
  std::set<std::uint64_t> groups;
  std::map<std::uint64_t, std::uint64_t> nodes;  // node handle -> group it is associated with (0: none)
  std::map<std::uint64_t, std::set<std::uint64_t>> node_ports;
  std::uint64_t next_node = 0;
  std::vector<std::string> epochs_written;
  std::map<std::uint64_t, std::uint64_t> heard;  // register AtpIngress.heard, set by the "data plane"
  std::size_t commands = 0;
  std::size_t fail_at = 0;  // 1-based command number to refuse (0: none)
  std::string fail_prefix;  // or refuse every command starting with this

  std::size_t entries() const {
    std::size_t n = 0;
    for (const auto& [table, entries] : tables) n += entries.size();
    return n;
  }
};

class FakeCli final : public runtime::SwitchCli {
 public:
  explicit FakeCli(std::shared_ptr<FakeSwitch> s) : s_(std::move(s)) {}

  std::string run(const std::string& command) override {
    ++s_->commands;
    if (s_->commands == s_->fail_at ||
        (!s_->fail_prefix.empty() && command.starts_with(s_->fail_prefix)))
      throw runtime::SwitchCliError("'" + command + "': Invalid table operation (ERROR)");
    std::istringstream in(command);
    std::string verb, a, b;
    in >> verb >> a;
    if (verb == "table_set_default") return s_->defaults[a] = command, "";
    if (verb == "table_add") {
      in >> b;
      std::string key;
      std::getline(in, key);
      key = key.substr(0, key.find("=>"));
      for (const auto& [h, k] : s_->tables[a])
        if (k == key) refuse(command, "Invalid table operation (DUPLICATE_ENTRY)");
      const std::uint64_t handle = s_->next_handle[a]++;
      s_->tables[a][handle] = key;
      return "Entry has been added with handle " + std::to_string(handle) + "\n";
    }
    if (verb == "table_delete") {
      std::uint64_t handle = 0;
      in >> handle;
      if (s_->tables[a].erase(handle) == 0) refuse(command, "Invalid table operation (INVALID_HANDLE)");
      return "";
    }
    if (verb == "mc_mgrp_create") {
      if (!s_->groups.insert(std::stoull(a)).second) refuse(command, "Invalid PRE operation (ERROR)");
      return "Creating multicast group " + a + "\n";
    }
    if (verb == "mc_node_create") {
      s_->nodes[s_->next_node] = 0;
      s_->node_ports[s_->next_node] = ports(in);
      return "node was created with handle " + std::to_string(s_->next_node++) + "\n";
    }
    if (verb == "mc_node_update") {
      if (!s_->nodes.contains(std::stoull(a))) refuse(command, "Invalid PRE operation (INVALID_L1_HANDLE)");
      s_->node_ports[std::stoull(a)] = ports(in);
      return "";
    }
    if (verb == "mc_node_associate" || verb == "mc_node_dissociate") {
      std::uint64_t node = 0;
      in >> node;
      const auto it = s_->nodes.find(node);
      if (it == s_->nodes.end() || !s_->groups.contains(std::stoull(a))) refuse(command, "Invalid PRE operation (INVALID_L1_HANDLE)");
      it->second = verb == "mc_node_associate" ? std::stoull(a) : 0;
      return "";
    }
    if (verb == "mc_node_destroy") {
      s_->node_ports.erase(std::stoull(a));
      if (s_->nodes.erase(std::stoull(a)) == 0) refuse(command, "Invalid PRE operation (INVALID_L1_HANDLE)");
      return "";
    }
    if (verb == "mc_mgrp_destroy") {
      if (s_->groups.erase(std::stoull(a)) == 0) refuse(command, "Invalid PRE operation (INVALID_MGID)");
      return "";
    }
    if (verb == "register_write") {
      std::string index, value;
      in >> index >> value;
      if (a == "AtpIngress.heard") s_->heard[std::stoull(index)] = std::stoull(value);
      else s_->epochs_written.push_back(value);
      return "";
    }
    if (verb == "register_read") {
      std::uint64_t index = 0;
      in >> index;
      return a + "[" + std::to_string(index) + "]= " + std::to_string(s_->heard[index]) + "\n";
    }
    if (verb == "counter_read") return a + "[0]= (100 bytes, 7 packets)\n";
    refuse(command, "*** Unknown syntax: " + command);
    return "";
  }

 private:
  static std::set<std::uint64_t> ports(std::istringstream& in) {
    std::set<std::uint64_t> out;
    for (std::uint64_t p = 0; in >> p;) out.insert(p);
    return out;
  }
  [[noreturn]] static void refuse(const std::string& command, const std::string& why) {
    throw runtime::SwitchCliError("'" + command + "': " + why);
  }
  std::shared_ptr<FakeSwitch> s_;
};

// examples/p4_two_racks.toml's rackA with a pool BMv2 holds: jobs 7 (two workers here) and 8.
constexpr const char* kFabric = R"(
[[switch]]
name = "rackA"
address = "10.1.0.1:9999"
level = 1
uplink = "spine"
aggregators = 4096
values_per_aggregator = 14
policy = "POLICY"
mac = "02:00:0a:01:00:01"
ports = [
  { port = 128, peer = "10.1.0.11", mac = "0c:42:a1:00:01:0b" },
  { port = 136, peer = "10.1.0.12", mac = "0c:42:a1:00:01:0c" },
  { port = 144, peer = "10.0.0.1", mac = "02:00:0a:00:00:01" },
]

[[switch]]
name = "spine"
address = "10.0.0.1:9999"
level = 2
aggregators = 4096
values_per_aggregator = 14
mac = "02:00:0a:00:00:01"
ports = [ { port = 128, peer = "10.1.0.1", mac = "02:00:0a:01:00:01" },
          { port = 152, peer = "10.0.1.10", mac = "0c:42:a1:00:00:0a" } ]

[[ps]]
name = "ps0"
address = "10.0.1.10:9100"
)";

constexpr const char* kJob7 = R"(
[[job]]
id = 7
window = 64
values_per_packet = 14
parameter_servers = ["ps0"]
workers = [ { rack = "rackA", address = "10.1.0.11:9200" },
            { rack = "rackA", address = "10.1.0.12:9200" } ]
)";

constexpr const char* kJob8 = R"(
[[job]]
id = 8
window = 32
values_per_packet = 14
parameter_servers = ["ps0"]
workers = [ { rack = "rackA", address = "10.1.0.11:9201" } ]
)";

control::ClusterConfig fabric(const std::string& policy, const std::string& jobs = "") {
  std::string text = kFabric;
  text.replace(text.find("POLICY"), 6, policy);
  return control::ClusterConfig::parse(text + jobs, "test fabric");
}

struct Agent {
  std::shared_ptr<FakeSwitch> sw = std::make_shared<FakeSwitch>();
  std::unique_ptr<P4SwitchAgent> agent;
  Agent(const control::ClusterConfig& f) {
    agent = std::make_unique<P4SwitchAgent>(f, "rackA", std::make_unique<FakeCli>(sw));
  }
};

TEST(P4SwitchAgent, StartsWithTheProfileTheRoutesAndTheFilesJobs) {
  Agent a(fabric("atp", std::string(kJob7) + kJob8));
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7, 8}));
  EXPECT_TRUE(a.sw->defaults.contains("AtpIngress.profile"));
  EXPECT_EQ(a.sw->tables["AtpIngress.ipv4_routes"].size(), 3u);  // one per port
  EXPECT_EQ(a.sw->tables["AtpIngress.job_table.jobs"].size(), 2u);
  EXPECT_EQ(a.sw->groups.size(), 2u);
  for (const auto& [node, group] : a.sw->nodes) EXPECT_NE(group, 0u) << "node " << node;
}

// What admitting adds, removing deletes: the switch is as it was, the other job untouched.
TEST(P4SwitchAgent, RemovingAJobDeletesExactlyWhatAdmittingItAdded) {
  Agent a(fabric("atp", kJob8));
  const std::size_t before = a.sw->entries();
  const auto jobs_before = a.sw->tables["AtpIngress.job_table.jobs"];
  a.agent->admit(fabric("atp", kJob7), 7);
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7, 8}));
  EXPECT_GT(a.sw->entries(), before);
  EXPECT_EQ(a.sw->groups.size(), 2u);

  EXPECT_TRUE(a.agent->remove_job(7));
  EXPECT_EQ(a.sw->entries(), before);
  EXPECT_EQ(a.sw->tables["AtpIngress.job_table.jobs"], jobs_before);
  EXPECT_EQ(a.sw->groups.size(), 1u);
  EXPECT_EQ(a.sw->nodes.size(), 1u);
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{8}));
  EXPECT_FALSE(a.agent->remove_job(7));
}

// A command the switch refuses midway leaves nothing of the admission behind.
TEST(P4SwitchAgent, ARefusedCommandUndoesTheAdmission) {
  for (const char* refused : {"table_add AtpIngress.job_table.answers", "mc_node_create",
                              "mc_node_associate"}) {
    Agent a(fabric("atp", kJob8));
    const std::size_t entries = a.sw->entries();
    a.sw->fail_prefix = refused;
    EXPECT_THROW(a.agent->admit(fabric("atp", kJob7), 7), runtime::SwitchCliError) << refused;
    a.sw->fail_prefix.clear();
    EXPECT_EQ(a.sw->entries(), entries) << refused;
    EXPECT_EQ(a.sw->groups.size(), 1u) << refused;
    EXPECT_EQ(a.sw->nodes.size(), 1u) << refused;
    EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{8})) << refused;
    a.agent->admit(fabric("atp", kJob7), 7);  // and it can be admitted once the switch takes it
    EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7, 8})) << refused;
  }
}

// Admitting a job that is there replaces it, as `atp switch` does (the switch would refuse the
// same keys twice).
TEST(P4SwitchAgent, AdmittingAJobAgainReplacesIt) {
  Agent a(fabric("atp", kJob7));
  const std::size_t entries = a.sw->entries();
  a.agent->admit(fabric("atp", kJob7), 7);
  EXPECT_EQ(a.sw->entries(), entries);
  EXPECT_EQ(a.sw->groups.size(), 1u);
  EXPECT_EQ(a.sw->nodes.size(), 1u);
}

// Under the static policy an admitted job gets aggregators nobody holds: the file naming job 7
// alone would give it the whole pool, over job 8's half.
TEST(P4SwitchAgent, AnAdmittedStaticJobGetsAFreeSliceOrIsRefused) {
  Agent a(fabric("static", std::string(kJob7) + kJob8));
  ASSERT_TRUE(a.agent->remove_job(7));
  const std::size_t entries = a.sw->entries();
  EXPECT_THROW(a.agent->admit(fabric("static", kJob7), 7), std::invalid_argument);
  EXPECT_EQ(a.sw->entries(), entries);  // refused before the switch was touched
  ASSERT_TRUE(a.agent->remove_job(8));
  a.agent->admit(fabric("static", kJob7), 7);
  EXPECT_EQ(a.agent->stats()["jobs"]["7"]["static_slice"], (nlohmann::json{0, 4096}));
}

// Issue 49 item 7: a job under the ATP policy showed the file's cut of the pool as its
// "static_slice"; it holds none.
TEST(P4SwitchAgent, AnAtpJobShowsNoStaticSlice) {
  Agent a(fabric("atp", std::string(kJob7) + kJob8));
  a.agent->admit(fabric("atp", std::string(kJob7) + kJob8), 8);
  for (const char* job : {"7", "8"})
    EXPECT_FALSE(a.agent->stats()["jobs"][job].contains("static_slice")) << job;
}

TEST(P4SwitchAgent, TheClaimClockWritesEachNewEpochOnceAndRetriesAFailedWrite) {
  Agent a(fabric("atp"));
  const Time start = runtime::monotonic_now();
  const Duration half = engines::SwitchConfig{}.stale_after / 2;
  a.agent->tick(start);
  a.agent->tick(start + 1);  // same epoch: nothing written
  a.sw->fail_prefix = "register_write";
  a.agent->tick(start + 2 * half);
  a.sw->fail_prefix.clear();
  a.agent->tick(start + 2 * half + 1);  // the epoch not written is tried again
  ASSERT_EQ(a.sw->epochs_written.size(), 2u);
  EXPECT_LT(std::stoi(a.sw->epochs_written[0]), std::stoi(a.sw->epochs_written[1]));
  const auto clock = a.agent->stats()["claim_clock"];
  EXPECT_EQ(clock["failures"], 1);
  EXPECT_EQ(clock["ticks"], 2);
  EXPECT_EQ(a.agent->stats()["next_steps"]["emit_sum"], 7);
}

// A member below joins the job's group only once the data plane has heard the job from it:
// results and float requests reach no address a tenant named but does not hold.
TEST(P4SwitchAgent, MembersJoinTheGroupOnlyOnceHeardFrom) {
  Agent a(fabric("atp"));
  a.agent->admit(fabric("atp", kJob7), 7);
  ASSERT_EQ(a.sw->node_ports.size(), 1u);
  std::set<std::uint64_t>& group = a.sw->node_ports.begin()->second;
  EXPECT_TRUE(group.empty());
  ASSERT_EQ(a.sw->heard.size(), 2u);  // one slot per member below, cleared at admission
  const std::uint64_t first_slot = a.sw->heard.begin()->first;
  EXPECT_TRUE(a.agent->learn_members(runtime::monotonic_now()));  // nobody heard yet
  EXPECT_TRUE(group.empty());
  a.sw->heard[first_slot] = 1;            // 10.1.0.11's packet arrived on port 128
  EXPECT_TRUE(a.agent->learn_members(runtime::monotonic_now()));  // the other is still unheard
  EXPECT_EQ(group, (std::set<std::uint64_t>{128}));
  a.sw->heard[first_slot + 1] = 1;
  EXPECT_FALSE(a.agent->learn_members(runtime::monotonic_now()));
  EXPECT_EQ(group, (std::set<std::uint64_t>{128, 136}));
  EXPECT_EQ(a.agent->stats()["jobs"]["7"]["members_heard"], 2);

  // The slots go to the next job, cleared: its members are not heard for the old one's packets.
  ASSERT_TRUE(a.agent->remove_job(7));
  a.agent->admit(fabric("atp", kJob8), 8);
  EXPECT_EQ(a.sw->heard[first_slot], 0u);
  EXPECT_TRUE(a.sw->node_ports.begin()->second.empty());
}

// A member named but never there was read once a second for ever (issue 49 item 6: 320 CLI
// reads a second for 10 jobs of 32 silent workers). Quick reads after its admission, then each
// silent read doubles the wait up to 8 s; once a member of the job is heard, its silent members
// are read quickly again (they likely start about together).
TEST(P4SwitchAgent, ASilentMemberIsReadLessAndLessOften) {
  Agent a(fabric("atp"));
  a.agent->admit(fabric("atp", kJob7), 7);  // two members below, silent
  const std::uint64_t first_slot = a.sw->heard.begin()->first;
  const Time admitted = runtime::monotonic_now();
  auto reads_over = [&](Time from, Time to) {
    const std::uint64_t before = a.sw->commands;
    for (Time t = from; t < to; t += P4SwitchAgent::kLearnPeriod) a.agent->learn_members(t);
    return a.sw->commands - before;
  };
  EXPECT_GE(reads_over(admitted, admitted + 2 * kSecond), 2 * 50u);  // quick after admission
  Time t = admitted + 2 * kSecond;
  const std::uint64_t hour = reads_over(t, t + 3600 * kSecond);
  EXPECT_LE(hour, 2 * (3600u / 8 + 6)) << "two silent members read every second cost 7,200";
  EXPECT_GE(hour, 2 * (3600u / 8 - 6));
  t += 3600 * kSecond;
  a.sw->heard[first_slot] = 1;  // the job starts, an hour late: heard within the longest wait
  const std::set<std::uint64_t>& group = a.sw->node_ports.begin()->second;
  for (const Time until = t + 8 * kSecond; group.empty() && t <= until; t += P4SwitchAgent::kLearnPeriod)
    a.agent->learn_members(t);
  EXPECT_EQ(group, (std::set<std::uint64_t>{128}));
  a.sw->heard[first_slot + 1] = 1;  // its other worker, just after: read within the quick reads
  reads_over(t, t + 100 * kMillisecond);
  EXPECT_EQ(a.sw->node_ports.begin()->second, (std::set<std::uint64_t>{128, 136}));
}

// A job admitted again that the switch cannot hold keeps what it held: its member slots are not
// handed to the next job while its entries still use them.
TEST(P4SwitchAgent, ARefusedReadmissionKeepsTheRunningJobsSlots) {
  Agent a(fabric("atp"));
  a.agent->admit(fabric("atp", kJob7), 7);
  std::string unwired = kJob7;
  unwired.replace(unwired.find("10.1.0.12"), 9, "10.1.0.99");  // behind no port of rackA
  EXPECT_THROW(a.agent->admit(fabric("atp", unwired), 7), std::invalid_argument);
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7}));
  a.agent->admit(fabric("atp", kJob8), 8);
  EXPECT_EQ(a.sw->heard.size(), 3u);  // job 8's member got a slot of its own
}

// A delete the switch refuses is kept and tried again: the entry would otherwise stay with no
// handle left, and the job's next admission would meet it as a duplicate key.
TEST(P4SwitchAgent, ARefusedDeleteIsTriedAgainUntilTheSwitchTakesIt) {
  Agent a(fabric("atp"));
  const std::size_t base = a.sw->entries();
  a.agent->admit(fabric("atp", kJob7), 7);
  a.sw->fail_prefix = "table_delete";
  EXPECT_TRUE(a.agent->remove_job(7));
  EXPECT_GT(a.sw->entries(), base);
  EXPECT_GT(a.agent->retry_deletes(), 0u);  // still refused
  a.sw->fail_prefix.clear();
  a.agent->admit(fabric("atp", kJob7), 7);  // the leftovers go first, then no duplicate key
  EXPECT_TRUE(a.agent->remove_job(7));
  EXPECT_EQ(a.agent->retry_deletes(), 0u);
  EXPECT_EQ(a.sw->entries(), base);
}

// A member that stays silent is read every poll for a while, then once a second.
TEST(P4SwitchAgent, ASilentMemberIsReadLessOften) {
  Agent a(fabric("atp"));
  a.agent->admit(fabric("atp", kJob8), 8);
  const Time later = runtime::monotonic_now() + 3 * kSecond;
  const std::size_t before = a.sw->commands;
  EXPECT_TRUE(a.agent->learn_members(later));
  EXPECT_EQ(a.sw->commands, before + 1);
  EXPECT_TRUE(a.agent->learn_members(later + 100 * kMillisecond));
  EXPECT_EQ(a.sw->commands, before + 1);
  EXPECT_TRUE(a.agent->learn_members(later + 2 * kSecond));
  EXPECT_EQ(a.sw->commands, before + 2);
}

TEST(P4SwitchAgent, AnAnswerWithoutItsHandleIsAnError) {
  EXPECT_EQ(number_after("Entry has been added with handle 12\n", "with handle", "c"), 12u);
  EXPECT_THROW(number_after("Entry has been added\n", "with handle", "c"), runtime::SwitchCliError);
  EXPECT_THROW(number_after("with handle x", "with handle", "c"), runtime::SwitchCliError);
}

// `atp p4 agent --target tofino`: each change is one bfrt_python script, here read back by a
// stand-in shell that keeps what it was given (or fails it).
struct TofinoAgent {
  std::vector<std::pair<std::string, std::string>> scripts;  // (file name, content)
  bool fail = false;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("atp-tofino-agent-" + std::to_string(::getpid()));
  std::unique_ptr<TofinoSwitchAgent> agent;
  explicit TofinoAgent(const control::ClusterConfig& f) {
    std::filesystem::create_directories(dir);
    agent = std::make_unique<TofinoSwitchAgent>(f, "rackA", [this](const std::string& path) {
      std::ifstream in(path);
      scripts.emplace_back(std::filesystem::path(path).filename().string(),
                           std::string(std::istreambuf_iterator<char>(in), {}));
      if (fail) throw runtime::SwitchCliError("bfrt script " + path + ": Error: refused");
    }, dir.string());
  }
  ~TofinoAgent() { std::filesystem::remove_all(dir); }
};

control::P4Limits tofino() { return control::P4Limits::tofino(); }

nlohmann::json members_file(const TofinoAgent& a) {
  std::ifstream in(a.dir / "rackA-members.json");
  return nlohmann::json::parse(in);
}

TEST(TofinoSwitchAgent, StartsWithTheScriptAtpP4ConfigPrints) {
  const auto f = fabric("atp", std::string(kJob7) + kJob8);
  TofinoAgent a(f);
  ASSERT_EQ(a.scripts.size(), 1u);
  EXPECT_EQ(a.scripts[0].first, "rackA-1-start.py");
  EXPECT_EQ(a.scripts[0].second, control::bfrt_python_script(control::p4_switch(f, "rackA", tofino())));
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7, 8}));
  // The claim clock's own script, for a session of its own: it starts the clock.
  std::ifstream clock(a.dir / "rackA-claim-clock.py");
  const std::string text(std::istreambuf_iterator<char>(clock), {});
  EXPECT_NE(text.find("def claim_clock_forever("), std::string::npos);
  EXPECT_TRUE(text.ends_with("\nclaim_clock_forever()\n"));
  EXPECT_EQ(text.find(".add_with_"), std::string::npos);  // no entry: it may run beside them
  // Member learning's, over the members file the agent keeps: both jobs, admitted by script 1.
  std::ifstream learner(a.dir / "rackA-learn-members.py");
  const std::string learn(std::istreambuf_iterator<char>(learner), {});
  EXPECT_NE(learn.find("\nATP_MEMBERS = {}\n"), std::string::npos);  // the file's, every round
  EXPECT_NE(learn.find("\ndef learn_members_forever("), std::string::npos);
  EXPECT_TRUE(learn.ends_with("\nlearn_members_forever(members_file=\"" +
                              (a.dir / "rackA-members.json").string() + "\")\n"));
  EXPECT_EQ(learn.find(".add_with_"), std::string::npos);
  const auto members = members_file(a);
  ASSERT_EQ(members.size(), 2u);
  for (const auto& [group, job] : members.items()) EXPECT_EQ(job["admission"], 1);
}

TEST(TofinoSwitchAgent, AdmittingAndRemovingAJobRunTheJobsScripts) {
  TofinoAgent a(fabric("atp", kJob7));
  const auto f = fabric("atp", std::string(kJob7) + kJob8);
  a.agent->admit(f, 8);
  ASSERT_EQ(a.scripts.size(), 2u);
  EXPECT_EQ(a.scripts[1].first, "rackA-2-job8-add.py");
  EXPECT_EQ(a.scripts[1].second,
            control::bfrt_python_script(control::p4_switch_job(f, "rackA", 8, tofino())));
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7, 8}));
  // The learner's file names job 8's group and members, admitted by script 2.
  const auto job8 = control::bfrt_members(control::p4_switch_job(f, "rackA", 8, tofino()).groups, 2);
  ASSERT_EQ(job8.size(), 1u);
  EXPECT_EQ(members_file(a)[job8.begin().key()], job8.begin().value());
  EXPECT_EQ(members_file(a).size(), 2u);
  EXPECT_TRUE(a.agent->remove_job(8));
  ASSERT_EQ(a.scripts.size(), 3u);
  EXPECT_EQ(a.scripts[2].first, "rackA-3-job8-remove.py");
  EXPECT_EQ(a.scripts[2].second,
            control::bfrt_python_script(control::p4_switch_job(f, "rackA", 8, tofino()), "atp", true));
  EXPECT_FALSE(a.agent->remove_job(8));
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7}));
  EXPECT_FALSE(members_file(a).contains(job8.begin().key()));
  EXPECT_EQ(a.agent->stats()["scripts_run"], 3);
}

TEST(TofinoSwitchAgent, AdmittingAJobAgainDeletesItsEntriesFirst) {
  const auto f = fabric("atp", kJob7);
  TofinoAgent a(f);
  a.agent->admit(f, 7);
  ASSERT_EQ(a.scripts.size(), 3u);
  EXPECT_EQ(a.scripts[1].first, "rackA-2-job7-remove.py");
  EXPECT_EQ(a.scripts[2].first, "rackA-3-job7-add.py");
}

// A readmission the cluster file refuses touches nothing: the job keeps its entries and slice.
TEST(TofinoSwitchAgent, ARefusedReadmissionLeavesTheJobAsItWas) {
  TofinoAgent a(fabric("static", kJob7));
  EXPECT_THROW(a.agent->admit(fabric("static", kJob8), 7), std::invalid_argument);
  EXPECT_EQ(a.scripts.size(), 1u);  // no delete ran
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{7}));
  EXPECT_EQ(a.agent->stats()["jobs"]["7"]["static_slice"], (nlohmann::json{0, 4096}));
}

// A script the shell fails is undone as far as it goes, and leaves the job out, what it held
// free for the next one.
TEST(TofinoSwitchAgent, AScriptTheShellFailsLeavesTheJobOut) {
  TofinoAgent a(fabric("static"));
  a.fail = true;
  EXPECT_THROW(a.agent->admit(fabric("static", kJob7), 7), runtime::SwitchCliError);
  ASSERT_EQ(a.scripts.size(), 3u);
  EXPECT_EQ(a.scripts[2].first, "rackA-3-job7-undo.py");
  EXPECT_TRUE(a.agent->job_ids().empty());
  EXPECT_EQ(a.agent->stats()["scripts_failed"], 2);
  a.fail = false;
  a.agent->admit(fabric("static", kJob8), 8);  // the whole pool: job 7 holds none of it
  EXPECT_EQ(a.agent->job_ids(), (std::vector<std::uint32_t>{8}));
  EXPECT_EQ(a.agent->stats()["jobs"]["8"]["static_slice"], (nlohmann::json{0, 4096}));
}

// A delete that fails partway would fail on the keys it deleted if run again: the job is
// forgotten, its slice free, and the error said.
TEST(TofinoSwitchAgent, AFailedDeleteForgetsTheJobAndSaysSo) {
  TofinoAgent a(fabric("static", kJob7));
  a.fail = true;
  EXPECT_THROW(a.agent->remove_job(7), runtime::SwitchCliError);
  EXPECT_TRUE(a.agent->job_ids().empty());
  EXPECT_NE(a.agent->stats()["last_error"].get<std::string>().find("job7-remove"), std::string::npos);
  a.fail = false;
  a.agent->admit(fabric("static", kJob8), 8);
  EXPECT_EQ(a.agent->stats()["jobs"]["8"]["static_slice"], (nlohmann::json{0, 4096}));
}

// A restarted agent numbers its scripts on from the folder's newest: none is overwritten.
TEST(TofinoSwitchAgent, ARestartedAgentKeepsTheFoldersScripts) {
  TofinoAgent a(fabric("atp", kJob7));
  a.agent->admit(fabric("atp", kJob7), 7);
  a.agent.reset();
  a.agent = std::make_unique<TofinoSwitchAgent>(fabric("atp", kJob7), "rackA",
                                                [](const std::string&) {}, a.dir.string());
  EXPECT_TRUE(std::filesystem::exists(a.dir / "rackA-1-start.py"));
  EXPECT_TRUE(std::filesystem::exists(a.dir / "rackA-4-start.py"));
}

// Scripts carry job tokens and run as root: each is created 0600 in a folder the agent's user
// alone can write; a shared or linked folder is refused with a clear error, and a link planted
// at a script's name is replaced, never followed (issue 49).
TEST(TofinoSwitchAgent, ScriptsArePrivateAndASharedFolderIsRefused) {
  TofinoAgent a(fabric("atp"));
  for (const auto& entry : std::filesystem::directory_iterator(a.dir)) {
    const auto perms = std::filesystem::status(entry.path()).permissions();
    EXPECT_EQ(perms & std::filesystem::perms::all, std::filesystem::perms::owner_read |
                                                       std::filesystem::perms::owner_write)
        << entry.path();
  }
  // A link planted where the next script goes: the agent writes its own file, the target stays.
  const std::filesystem::path target = a.dir.string() + "-target";
  std::ofstream(target) << "root-only\n";
  std::filesystem::create_symlink(target, a.dir / "rackA-2-job7-add.py");
  a.agent->admit(fabric("atp", kJob7), 7);
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "root-only\n");
  EXPECT_FALSE(std::filesystem::is_symlink(a.dir / "rackA-2-job7-add.py"));
  std::filesystem::remove(target);

  auto refused = [&](const std::filesystem::path& dir, const std::string& says) {
    try {
      TofinoSwitchAgent agent(fabric("atp"), "rackA", [](const std::string&) {}, dir.string());
      ADD_FAILURE() << dir << " was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  std::filesystem::permissions(a.dir, std::filesystem::perms::all);  // 0777, as /tmp without +t
  refused(a.dir, "writable by other users (mode 0777)");
  std::filesystem::permissions(a.dir, std::filesystem::perms::owner_all);
  const std::filesystem::path link = a.dir.string() + "-link";
  std::filesystem::create_directory_symlink(a.dir, link);
  refused(link, "is a symbolic link");
  std::filesystem::remove(link);
  refused(a.dir / "missing", "No such file or directory");
}

}  // namespace
}  // namespace atp::daemons
