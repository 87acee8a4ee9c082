// The run-time controller: what admission hands out and refuses (JobBook), and the gRPC
// service over real daemons' control sockets: programming, removal, leases, credentials,
// oversized requests and recovery after a restart of the controller or of a daemon.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "control/private_file.h"
#include "controller/controller_client.h"
#include "controller/controller_service.h"
#include "daemons/control_requests.h"
#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"
#include "engines/switch/switch_tables.h"
#include "runtime/local_servers.h"
#include "stuck_peer.h"

namespace atp::controller {
namespace {

std::string fabric_text(const std::string& tag, const char* policy = "atp") {
  return "[[switch]]\nname = \"rack0\"\naddress = \"127.0.0.1:0\"\naggregators = 64\n"
         "policy = \"" + std::string(policy) + "\"\ncontrol = \"/tmp/atp-test-" + tag + "-rack0.sock\"\n"
         "[[ps]]\nname = \"ps0\"\naddress = \"127.0.0.1:0\"\ncontrol = \"/tmp/atp-test-" + tag +
         "-ps0.sock\"\n[[ps]]\nname = \"ps1\"\naddress = \"127.0.0.1:0\"\ncontrol = \"/tmp/atp-test-" +
         tag + "-ps1.sock\"\n";
}

JobRequest two_workers(std::uint16_t first_port) {
  JobRequest r;
  r.name = "t";
  for (std::uint16_t p = first_port; p < first_port + 2; ++p)
    r.workers.push_back({"rack0", runtime::Endpoint{0x7F000001, p}});
  return r;
}

// A worker address no single host can hold would have the switches send the job's results at
// a whole network or group (issue 31 item 10): refused, naming the address and why.
TEST(JobBook, RefusesWorkerAddressesNoHostCanHold) {
  JobBook book(fabric_text("addresses"), "fabric");
  for (const char* bad : {"0.0.0.0", "0.1.2.3", "255.255.255.255", "224.0.0.1", "239.1.1.1",
                          "240.0.0.1"}) {
    JobRequest r = two_workers(7000);
    r.workers[1].address = runtime::Endpoint::parse_or_throw(std::string(bad) + ":7001", "test");
    try {
      book.prepare(r, 0);
      ADD_FAILURE() << bad << " admitted";
    } catch (const ControllerError& e) {
      EXPECT_EQ(e.kind, ControllerError::Kind::invalid);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  JobRequest fine = two_workers(7000);
  fine.workers[1].address = runtime::Endpoint::parse_or_throw("10.255.255.255:7001", "test");
  EXPECT_NO_THROW(book.prepare(fine, 0));  // a host's address in some /8 (no netmask here)
}

// Jobs the controller admits one at a time each get a home of their own (planned placement):
// the static share of the pool, disjoint while they fit, then evenly shared. Each job's
// cluster text once gave it the whole pool from index 0, as every other job's did, so two
// controller jobs met on every turn.
TEST(JobBook, EachAdmittedJobGetsAHomeOfItsOwn) {
  JobBook book(fabric_text("homes"), "fabric");  // a pool of 64, static share 1/4
  auto home_of = [&](const AdmittedJob& a) {
    runtime::AddressBook addresses;
    return book.cluster_of(a).worker_config(a.config.id, 0, addresses, {}).home;
  };
  std::vector<std::uint32_t> firsts;
  for (std::uint16_t k = 0; k < 5; ++k) {
    AdmittedJob a = book.prepare(two_workers(7000 + 10 * k), 0);
    const engines::HomeSlice home = home_of(a);
    EXPECT_EQ(home.count, 16u);
    EXPECT_EQ(home.first, a.config.home_first);
    firsts.push_back(home.first);
    book.record(std::move(a));
  }
  EXPECT_EQ(firsts, (std::vector<std::uint32_t>{0, 16, 32, 48, 0}));  // the fifth shares
  book.erase(2);  // home 16 is free again
  EXPECT_EQ(book.prepare(two_workers(7100), 0).config.home_first, 16u);
  // The home travels in the job's TOML, so its workers and PSs read the same.
  const AdmittedJob& third = *book.find(3);
  EXPECT_NE(book.cluster_text(third).find("home_first = 32"), std::string::npos);
}

// While the pool has room no job holds, the controller's jobs plan on it: a job alone on the
// whole pool (up to its window), the idle blocks going to the home next to them, and a job
// that arrives takes its home back (control/home_lending.h).
TEST(JobBook, IdleBlocksOfThePoolAreLentToTheJobsNextToThem) {
  JobBook book(fabric_text("lend"), "fabric");  // a pool of 64, homes of 16
  using Homes = std::map<std::uint32_t, control::Slice>;
  AdmittedJob a = book.prepare(two_workers(7000), 0);
  EXPECT_EQ(book.homes_to_plan_on(&a), (Homes{{1, {0, 64}}}));
  book.record(std::move(a));
  AdmittedJob b = book.prepare(two_workers(7010), 0);
  EXPECT_EQ(book.homes_to_plan_on(&b), (Homes{{1, {0, 16}}, {2, {16, 48}}}));
  book.record(std::move(b));
  JobRequest small = two_workers(7020);
  small.terms.window = 16;  // a window its home serves: lent nothing, so [48, 64) stays idle
  book.record(book.prepare(small, 0));
  EXPECT_EQ(book.homes_to_plan_on(), (Homes{{1, {0, 16}}, {2, {16, 16}}, {3, {32, 16}}}));
  book.erase(2);
  EXPECT_EQ(book.homes_to_plan_on(), (Homes{{1, {0, 32}}, {3, {32, 16}}}));
  // A controller that keeps homes tells each PS its job's own (after a restart from lending).
  EXPECT_EQ(book.homes_to_plan_on(nullptr, false), (Homes{{1, {0, 16}}, {3, {32, 16}}}));
}

// A tenant's jobs together stay within its aggregators and PS memory: each refusal names the
// quota and the tenant; other tenants and tenant-less admissions are not counted against it.
TEST(JobBook, ATenantsJobsStayWithinItsAggregatorsAndPsMemory) {
  Limits limits;  // homes of 16 on a pool of 64
  limits.quotas["small"] = Quota{.max_aggregators = 40};
  JobBook sizing(fabric_text("quota"), "fabric", limits);
  JobRequest sized = two_workers(7000);
  sized.tenant = "small";
  const std::uint64_t one_job = sizing.prepare(sized, 0).ps_memory;
  ASSERT_GT(one_job, 0u);
  limits.quotas["lean"] = Quota{.max_ps_memory_mb = (2 * one_job + (1 << 20)) >> 20};
  JobBook book(fabric_text("quota"), "fabric", limits);
  auto admit = [&](const std::string& tenant, std::uint16_t port) {
    JobRequest r = two_workers(port);
    r.tenant = tenant;
    book.record(book.prepare(r, 0));
  };
  auto refusal = [&](const std::string& tenant, std::uint16_t port) -> std::string {
    try {
      admit(tenant, port);
    } catch (const ControllerError& e) {
      EXPECT_EQ(e.kind, ControllerError::Kind::refused);
      return e.what();
    }
    return "admitted";
  };
  admit("small", 7000);
  admit("small", 7010);  // 32 of 40
  EXPECT_NE(refusal("small", 7020).find("tenant 'small' would hold 48 aggregators, above its "
                                        "max_aggregators of 40"),
            std::string::npos);
  admit("", 7030);  // tenant-less: not counted
  admit("lean", 7040);
  admit("lean", 7050);
  EXPECT_NE(refusal("lean", 7060).find("max_ps_memory_mb"), std::string::npos);
  EXPECT_EQ(book.ids().size(), 5u);
}

TEST(Tenants, ParsedFromTheFabricWithClearErrors) {
  const std::string fabric = fabric_text("tenant-parse");
  const auto tenants = parse_tenants(fabric +
                                         "[[tenant]]\nname = \"vision\"\ncredential_file = \"/etc/v\"\n"
                                         "max_jobs = 4\nmax_aggregators = 64\nmax_ps_memory_mb = 512\n",
                                     "fabric");
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].name, "vision");
  EXPECT_EQ(tenants[0].credential_file, "/etc/v");
  EXPECT_EQ(tenants[0].quota.max_jobs, 4u);
  EXPECT_EQ(tenants[0].quota.max_aggregators, 64u);
  EXPECT_EQ(tenants[0].quota.max_ps_memory_mb, 512u);
  EXPECT_TRUE(parse_tenants(fabric, "fabric").empty());
  for (const char* bad : {"[[tenant]]\ncredential_file = \"/x\"\n",
                          "[[tenant]]\nname = \"a\"\n",
                          "[[tenant]]\nname = \"a\"\ncredential_file = \"/x\"\nmax_jobs = -1\n",
                          "[[tenant]]\nname = \"a\"\ncredential_file = \"/x\"\n"
                          "[[tenant]]\nname = \"a\"\ncredential_file = \"/y\"\n"})
    EXPECT_THROW(parse_tenants(fabric + bad, "fabric"), std::invalid_argument) << bad;
}

// Homes index every ATP switch a job's sums pass: two-rack jobs on different racks still meet
// at their shared spine, so their homes differ; and a home fits the smallest pool the job's
// aggregation crosses (a job is never refused for a larger rack's share).
TEST(JobBook, HomesDifferWhereJobsShareASwitchAndFitTheSmallestPool) {
  std::string fabric = "[[switch]]\nname = \"spine\"\naddress = \"127.0.0.1:0\"\nlevel = 2\n"
                       "aggregators = 64\ncontrol = \"/tmp/atp-test-spine.sock\"\n";
  for (int r = 0; r < 4; ++r)
    fabric += "[[switch]]\nname = \"r" + std::to_string(r) + "\"\naddress = \"127.0.0.1:0\"\n"
              "uplink = \"spine\"\naggregators = " + (r == 0 ? "4096" : "64") +
              "\ncontrol = \"/tmp/atp-test-r" + std::to_string(r) + ".sock\"\n";
  fabric += "[[ps]]\nname = \"ps0\"\naddress = \"127.0.0.1:0\"\ncontrol = \"/tmp/atp-test-hps.sock\"\n";
  JobBook book(fabric, "fabric");
  auto across = [&](const char* a, const char* b, std::uint16_t port) {
    JobRequest r;
    r.name = "two racks";
    r.workers = {{a, runtime::Endpoint{0x7F000001, port}},
                 {b, runtime::Endpoint{0x7F000001, static_cast<std::uint16_t>(port + 1)}}};
    AdmittedJob job = book.prepare(r, 0);
    const auto home = std::pair{job.config.home_first, job.config.home_count};
    book.record(std::move(job));
    return home;
  };
  const auto first = across("r0", "r1", 7000);   // r0's pool is 4096, the others' 64
  const auto second = across("r2", "r3", 7010);  // other racks, the same spine
  EXPECT_EQ(first.second, 16u);                  // a quarter of the smallest pool, 64
  EXPECT_EQ(second.second, 16u);
  EXPECT_NE(first.first, second.first);
}

TEST(JobToml, ReadsBackAsTheSameJobAndToken) {
  JobBook book(fabric_text("toml"), "fabric");
  JobRequest r = two_workers(7000);
  r.terms.window = 32;
  r.terms.values_per_packet = 64;
  r.terms.max_gradient = 4;
  r.terms.aggregator_window = true;
  AdmittedJob a = book.prepare(r, 0);
  const auto cluster = book.cluster_of(a);
  const auto again = control::ClusterConfig::parse(book.cluster_text(a), "text");
  EXPECT_EQ(again.wire_token(a.config.id), cluster.wire_token(a.config.id));
  const auto& j = again.job(a.config.id);
  EXPECT_EQ(j.window, 32u);
  EXPECT_EQ(j.values_per_packet, 64);
  EXPECT_EQ(j.max_gradient, 4.0f);
  EXPECT_TRUE(j.aggregator_window);
  EXPECT_EQ(j.workers.size(), 2u);
  EXPECT_EQ(j.workers[1].address.port, 7001);
}

TEST(JobToml, StaticSlicesNamedBeyondASwitchThreadsPoolAreRefused) {
  auto job = [](int id, int port) {
    return "[[job]]\nid = " + std::to_string(id) + "\nstatic_aggregators = 40\n"
           "parameter_servers = [\"ps0\"]\nworkers = [{ rack = \"rack0\", address = \"127.0.0.1:" +
           std::to_string(port) + "\" }]\n";
  };
  const std::string fabric = fabric_text("slices", "static");
  EXPECT_NO_THROW(control::ClusterConfig::parse(fabric + job(1, 7000), "one"));
  try {
    control::ClusterConfig::parse(fabric + job(1, 7000) + job(2, 7001), "two");
    FAIL() << "80 of 64 aggregators accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
}

TEST(JobBook, EveryAdmissionIsAFreshJobWithItsOwnTokenAndCredential) {
  JobBook book(fabric_text("fresh"), "fabric");
  AdmittedJob a = book.prepare(two_workers(7000), 0);
  const std::uint32_t first = a.config.id;
  const std::string credential = a.credential;
  const std::uint32_t token = a.config.token;
  book.record(std::move(a));
  // The same workers again (a relaunch): another id, token and credential.
  AdmittedJob b = book.prepare(two_workers(7000), 0);
  EXPECT_NE(b.config.id, first);
  EXPECT_NE(b.config.token, token);
  EXPECT_NE(b.credential, credential);
  EXPECT_EQ(b.credential.size(), 32u);
  // Least loaded PS first.
  EXPECT_EQ(b.config.parameter_servers, std::vector<std::string>{"ps1"});
  book.record(std::move(b));
  // A removed job's id does not come straight back.
  book.erase(first);
  EXPECT_NE(book.prepare(two_workers(7000), 0).config.id, first);
}

TEST(JobBook, RefusesWhatDoesNotFitWithTheReason) {
  JobBook book(fabric_text("refuse"), "fabric", Limits{.max_jobs = 1});
  auto refusal = [&](const JobRequest& r) {
    try {
      book.prepare(r, 0);
    } catch (const ControllerError& e) {
      return std::string(e.what());
    }
    return std::string("admitted");
  };
  JobRequest r = two_workers(7000);
  r.workers[1].rack = "nowhere";
  EXPECT_NE(refusal(r).find("nowhere"), std::string::npos);
  r = two_workers(7000);
  r.workers[1].address = r.workers[0].address;
  EXPECT_NE(refusal(r).find("twice"), std::string::npos);
  r = JobRequest{};
  for (std::uint16_t p = 0; p < 33; ++p) r.workers.push_back({"rack0", {0x7F000001, std::uint16_t(8000 + p)}});
  EXPECT_NE(refusal(r).find("32 workers"), std::string::npos);  // beyond the bitmap
  r = two_workers(7000);
  r.terms.window = 48;
  EXPECT_NE(refusal(r).find("power of two"), std::string::npos);
  r.terms.window = 1u << 20;  // its PS would allocate ~730 MB on its packet loop
  EXPECT_NE(refusal(r).find("--max-window"), std::string::npos);
  r.terms.window = 0;
  r.terms.parameter_servers = 3;
  EXPECT_NE(refusal(r).find("parameter servers"), std::string::npos);
  r.terms.parameter_servers = 0;
  r.terms.lease_seconds = 100000;
  EXPECT_NE(refusal(r).find("lease"), std::string::npos);
  book.record(book.prepare(two_workers(7000), 0));
  try {
    book.prepare(two_workers(7100), 0);
    FAIL() << "admitted beyond max_jobs";
  } catch (const ControllerError& e) {
    EXPECT_EQ(e.kind, ControllerError::Kind::refused);
  }
  EXPECT_THROW(JobBook(fabric_text("x") + "[[job]]\nid = 1\nparameter_servers = [\"ps0\"]\n"
                       "workers = [{ rack = \"rack0\", address = \"127.0.0.1:5\" }]\n", "fabric"),
               std::invalid_argument);
}

TEST(JobBook, WhenEveryIdAndMulticastGroupIsHeldTheNextJobIsRefused) {
  JobBook book(fabric_text("ids"), "fabric", Limits{.max_jobs = 1 << 20});
  for (std::uint32_t i = 0; i < engines::kMaxSwitchJobId; ++i) book.record(book.prepare(two_workers(7000), 0));
  try {
    book.prepare(two_workers(7000), 0);
    FAIL() << "admitted a job with no id left";
  } catch (const ControllerError& e) {
    EXPECT_EQ(e.kind, ControllerError::Kind::refused);
    EXPECT_NE(std::string(e.what()).find("multicast group"), std::string::npos);
  }
  book.erase(77);
  EXPECT_EQ(book.prepare(two_workers(7000), 0).config.id, 77u);  // the only one free
}

TEST(JobBook, LeasesLapseUnlessRenewedAndStateSurvivesARestart) {
  const std::string path = ::testing::TempDir() + "/controller-state.json";
  std::filesystem::remove(path);
  JobBook book(fabric_text("lease"), "fabric", Limits{.default_lease = 10 * kSecond});
  AdmittedJob a = book.prepare(two_workers(7000), 0);
  const std::uint32_t id = a.config.id;
  const std::string credential = a.credential;
  book.record(std::move(a));
  EXPECT_TRUE(book.expired(9 * kSecond).empty());
  EXPECT_TRUE(book.renew(id, 9 * kSecond));  // the first renewal claims it
  EXPECT_FALSE(book.renew(id, 9 * kSecond));
  EXPECT_TRUE(book.expired(18 * kSecond).empty());
  EXPECT_EQ(book.expired(19 * kSecond), std::vector<std::uint32_t>{id});
  book.save(path, {19 * kSecond, 1'000'000});
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  JobBook restarted(fabric_text("lease"), "fabric");
  restarted.load(path, {100 * kSecond, 1'100'000});
  ASSERT_NE(restarted.find(id), nullptr);
  EXPECT_EQ(restarted.find(id)->credential, credential);
  EXPECT_EQ(restarted.find(id)->config.token, book.find(id)->config.token);
  EXPECT_TRUE(restarted.expired(109 * kSecond).empty());  // claimed: a full lease from the restart
  EXPECT_NE(restarted.prepare(two_workers(7200), 100 * kSecond).config.id, id);
}

// A controller killed after saving a job and before answering its admission leaves a job whose
// credential nobody holds. It must lapse when its first lease would have, however often the
// controller restarts (it once got a full lease at every restart).
TEST(JobBook, AJobNobodyClaimedLapsesAcrossRestarts) {
  const std::string path = ::testing::TempDir() + "/controller-orphan.json";
  std::filesystem::remove(path);
  JobBook book(fabric_text("lease"), "fabric", Limits{.default_lease = 10 * kSecond});
  AdmittedJob a = book.prepare(two_workers(7000), 0);
  const std::uint32_t id = a.config.id;
  book.record(std::move(a));
  book.save(path, {0, 5'000'000});  // then killed before answering
  JobBook soon(fabric_text("lease"), "fabric");  // restarted 4 s later
  soon.load(path, {50 * kSecond, 5'004'000});
  ASSERT_NE(soon.find(id), nullptr);
  EXPECT_TRUE(soon.expired(55 * kSecond).empty());
  EXPECT_EQ(soon.expired(56 * kSecond), std::vector<std::uint32_t>{id});  // 6 s left, not 10
  soon.save(path, {51 * kSecond, 5'005'000});  // and killed again
  // Restarted once more, 20 s on: its lease ran out while the controller was down, so it gets
  // one grace (time for a first renewal: 10 / 3 + 5 s), once.
  JobBook later(fabric_text("lease"), "fabric");
  later.load(path, {0, 5'025'000});
  EXPECT_TRUE(later.expired(8 * kSecond).empty());
  EXPECT_EQ(later.expired(9 * kSecond), std::vector<std::uint32_t>{id});
  later.save(path, {0, 5'025'000});
  JobBook again(fabric_text("lease"), "fabric");  // and again, a minute on: no second grace
  again.load(path, {0, 5'085'000});
  EXPECT_EQ(again.expired(0), std::vector<std::uint32_t>{id});  // lapsed: the reaper removes it
}

// `atp job admit --cluster-out F` once wrote the job's token into F as the umask made it (0644
// here) and only then took the mode back: a reader who opened F meanwhile, or held an older F
// open, kept reading. Now the token goes into a new file that is 0600 from its first byte.
TEST(PrivateFile, ASecretNeverLandsInAFileOthersCouldOpen) {
  const std::string path = ::testing::TempDir() + "/private-file-test.toml";
  { std::ofstream(path) << "old\n"; }
  std::filesystem::permissions(path, std::filesystem::perms::all);
  std::ifstream held(path);  // another user's reader, opened before
  const mode_t old_mask = ::umask(0);
  control::write_private_file(path, "token = 123\n");
  ::umask(old_mask);
  std::string line;
  std::getline(held, line);
  EXPECT_EQ(line, "old");  // the file they held never saw the secret
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::ifstream fresh(path);
  std::getline(fresh, line);
  EXPECT_EQ(line, "token = 123");
  for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir()))
    EXPECT_EQ(e.path().string().find("private-file-test.toml.tmp"), std::string::npos) << e.path();
}

// The daemons of the fabric, serving their control sockets on one event loop thread.
class Fabric {
 public:
  // `unserved`: a PS whose control socket is left to the test (to play a stopped daemon).
  explicit Fabric(const std::string& text, std::string unserved = {})
      : config_(control::ClusterConfig::parse(text, "fabric")), unserved_(std::move(unserved)) {
    start();
  }
  ~Fabric() { stop(); }
  void start() {
    sw_ = std::make_unique<daemons::SwitchDaemon>(config_, "rack0");
    for (const char* name : {"ps0", "ps1"}) ps_.push_back(std::make_unique<daemons::PsDaemon>(config_, name));
    loop_ = std::make_unique<runtime::EventLoop>();
    sw_->attach(*loop_);
    controls_.emplace_back(std::make_unique<runtime::ControlSocket>(
        *loop_, config_.switch_named("rack0").control,
        [this](const nlohmann::json& r) { return daemons::answer_control(*sw_, r); }));
    for (auto& ps : ps_) {
      ps->attach(*loop_);
      auto* p = ps.get();
      if (p->name() == unserved_) continue;
      controls_.emplace_back(std::make_unique<runtime::ControlSocket>(
          *loop_, config_.server_named(p->name()).control,
          [p](const nlohmann::json& r) { return daemons::answer_control(*p, r); }));
    }
    loop_->on_wake([] {});
    thread_ = std::thread([this] { loop_->run(); });
  }
  void stop() {
    loop_->stop();
    loop_->wake();
    thread_.join();
    controls_.clear();
    ps_.clear();
    sw_.reset();
    loop_.reset();
  }
  std::vector<std::uint32_t> switch_jobs() const {
    return runtime::control_request(config_.switch_named("rack0").control, {{"cmd", "list"}})
        .at("jobs").get<std::vector<std::uint32_t>>();
  }
  std::vector<std::uint32_t> ps_jobs(const char* name) const {
    return runtime::control_request(config_.server_named(name).control, {{"cmd", "list"}})
        .at("jobs").get<std::vector<std::uint32_t>>();
  }

 private:
  control::ClusterConfig config_;
  std::string unserved_;
  std::unique_ptr<runtime::EventLoop> loop_;
  std::unique_ptr<daemons::SwitchDaemon> sw_;
  std::vector<std::unique_ptr<daemons::PsDaemon>> ps_;
  std::vector<std::unique_ptr<runtime::ControlSocket>> controls_;
  std::thread thread_;
};

constexpr char kOperator[] = "operator-secret-0123456789";

// A controller over `fabric`, serving gRPC on a free loopback port.
class Controller {
 public:
  Controller(const std::string& fabric, const std::string& state, Limits limits = {},
             std::vector<Tenant> tenants = {})
      : service_(recovered(fabric, state, limits), {state, kOperator, "", "", std::move(tenants)}) {
    service_.reconcile();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~Controller() { server_->Shutdown(); }
  static JobBook recovered(const std::string& fabric, const std::string& state, Limits limits) {
    JobBook book(fabric, "fabric", limits);
    if (!state.empty()) book.load(state, instant_now());
    return book;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  ControllerService& service() { return service_; }

 private:
  ControllerService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

v1::AdmitJobRequest request(std::uint16_t first_port, std::uint32_t workers = 2) {
  v1::AdmitJobRequest r;
  r.set_name("job");
  for (std::uint16_t p = first_port; p < first_port + workers; ++p) {
    auto* w = r.add_workers();
    w->set_rack("rack0");
    w->set_address("127.0.0.1:" + std::to_string(p));
  }
  return r;
}

grpc::StatusCode code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ControllerCallError& e) {
    return e.code;
  }
  return grpc::StatusCode::OK;
}

// Tenants (issue 31 item 6): each admits with its own credential and its jobs count against
// its quota, refused with RESOURCE_EXHAUSTED naming it; with tenants and no admission
// credential, nobody else admits. Before: one client filled the controller's 1,024 jobs.
TEST(ControllerService, EachTenantAdmitsWithItsCredentialWithinItsQuota) {
  const std::string text = fabric_text("tenants");
  Fabric fabric(text);
  Limits limits;
  limits.quotas["vision"] = Quota{.max_jobs = 1};
  Controller controller(text, "", limits,
                        {Tenant{"vision", "unused", "vision-secret-0123456789", {.max_jobs = 1}}});
  ControllerClient vision(controller.address(), "vision-secret-0123456789");
  const v1::Admission first = vision.admit(request(7000));
  try {
    vision.admit(request(7100));
    ADD_FAILURE() << "admitted beyond max_jobs";
  } catch (const ControllerCallError& e) {
    EXPECT_EQ(e.code, grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(std::string(e.what()).find("max_jobs"), std::string::npos) << e.what();
  }
  ControllerClient anonymous(controller.address());
  EXPECT_EQ(code_of([&] { anonymous.admit(request(7200)); }), grpc::StatusCode::PERMISSION_DENIED);
  ControllerClient(controller.address(), first.credential()).remove(first.job_id());
  EXPECT_NO_THROW(vision.admit(request(7300)));  // its quota is free again
}

TEST(ControllerService, AdmitsProgramsTheFabricAndRemovesWithTheJobsCredential) {
  const std::string text = fabric_text("admit");
  Fabric fabric(text);
  Controller controller(text, "");
  ControllerClient tenant(controller.address());
  const v1::Admission a = tenant.admit(request(7000));
  EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{a.job_id()});
  EXPECT_EQ(fabric.ps_jobs("ps0"), std::vector<std::uint32_t>{a.job_id()});
  EXPECT_TRUE(fabric.ps_jobs("ps1").empty());
  // The cluster file it hands out derives the same token the switch checks.
  const auto cluster = control::ClusterConfig::parse(a.cluster_toml(), "admission");
  EXPECT_EQ(cluster.jobs().size(), 1u);

  // Another tenant, the anonymous and a forged credential: refused, and nothing changes.
  const v1::Admission b = tenant.admit(request(7100));
  EXPECT_EQ(fabric.ps_jobs("ps1"), std::vector<std::uint32_t>{b.job_id()});
  ControllerClient other(controller.address(), b.credential());
  EXPECT_EQ(code_of([&] { other.remove(a.job_id()); }), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(code_of([&] { other.job(a.job_id()); }), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(code_of([&] { tenant.remove(a.job_id()); }), grpc::StatusCode::PERMISSION_DENIED);
  ControllerClient forged(controller.address(), std::string(a.credential().size(), 'a'));
  EXPECT_EQ(code_of([&] { forged.renew(a.job_id()); }), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(code_of([&] { other.list(); }), grpc::StatusCode::PERMISSION_DENIED);
  // A job it cannot see looks the same whether or not it exists.
  EXPECT_EQ(code_of([&] { other.job(9999); }), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(fabric.switch_jobs().size(), 2u);

  ControllerClient own(controller.address(), a.credential());
  EXPECT_EQ(own.job(a.job_id()).workers_size(), 2);
  own.remove(a.job_id());
  EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{b.job_id()});
  EXPECT_TRUE(fabric.ps_jobs("ps0").empty());
  ControllerClient op(controller.address(), kOperator);
  EXPECT_EQ(op.list().jobs_size(), 1);
  EXPECT_EQ(code_of([&] { op.job(a.job_id()); }), grpc::StatusCode::NOT_FOUND);
  op.remove(b.job_id());
  EXPECT_TRUE(fabric.switch_jobs().empty());
}

TEST(ControllerService, RefusesMalformedOversizedAndUnfittingJobsChangingNothing) {
  const std::string text = fabric_text("refusals", "static");
  Fabric fabric(text);
  Controller controller(text, "", Limits{.static_share = 2});
  ControllerClient tenant(controller.address());
  v1::AdmitJobRequest bad = request(7000);
  bad.mutable_workers(1)->set_address("127.0.0.1");
  EXPECT_EQ(code_of([&] { tenant.admit(bad); }), grpc::StatusCode::INVALID_ARGUMENT);
  bad = request(7000);
  bad.set_name(std::string(kMaxRequestBytes, 'x'));
  EXPECT_EQ(code_of([&] { tenant.admit(bad); }), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Static policy, half the pool each: two jobs fit, a third does not; the switch says so.
  tenant.admit(request(7000));
  tenant.admit(request(7100));
  try {
    tenant.admit(request(7200));
    FAIL() << "a third half of the pool was admitted";
  } catch (const ControllerCallError& e) {
    EXPECT_EQ(e.code, grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(std::string(e.what()).find("no free run"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fabric.switch_jobs().size(), 2u);
  EXPECT_EQ(fabric.ps_jobs("ps0").size() + fabric.ps_jobs("ps1").size(), 2u);  // rolled back
  ControllerClient op(controller.address(), kOperator);
  EXPECT_EQ(op.list().jobs_size(), 2);
}

TEST(ControllerService, ALapsedLeaseRemovesTheJob) {
  const std::string text = fabric_text("lapse");
  Fabric fabric(text);
  Controller controller(text, "");
  ControllerClient tenant(controller.address());
  v1::AdmitJobRequest r = request(7000);
  r.set_lease_seconds(5);
  const v1::Admission a = tenant.admit(r);
  tenant.set_credential(a.credential());
  const Time admitted = runtime::monotonic_now();
  controller.service().reap(admitted + 4 * kSecond);
  EXPECT_EQ(fabric.switch_jobs().size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  tenant.renew(a.job_id());
  controller.service().reap(admitted + 5500 * kMillisecond);  // the first lease had ended
  EXPECT_EQ(fabric.switch_jobs().size(), 1u);
  controller.service().reap(runtime::monotonic_now() + 5 * kSecond);
  EXPECT_TRUE(fabric.switch_jobs().empty());
  EXPECT_TRUE(fabric.ps_jobs("ps0").empty());
  EXPECT_EQ(code_of([&] { tenant.job(a.job_id()); }), grpc::StatusCode::PERMISSION_DENIED);
}

TEST(ControllerService, ARestartedControllerKeepsItsJobsAndARestartedDaemonGetsThemBack) {
  const std::string text = fabric_text("restart");
  const std::string state = ::testing::TempDir() + "/controller-restart.json";
  std::filesystem::remove(state);
  Fabric fabric(text);
  v1::Admission a;
  {
    Controller controller(text, state);
    a = ControllerClient(controller.address()).admit(request(7000));
  }
  // While the controller is down the daemons keep the job; the next one knows it.
  EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{a.job_id()});
  fabric.stop();
  fabric.start();  // the daemons restarted too: they lost the job
  EXPECT_TRUE(fabric.switch_jobs().empty());
  Controller controller(text, state);
  EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{a.job_id()});
  EXPECT_EQ(fabric.ps_jobs("ps0"), std::vector<std::uint32_t>{a.job_id()});
  ControllerClient own(controller.address(), a.credential());
  EXPECT_EQ(own.job(a.job_id()).name(), "job");
  // A job on a daemon that the state does not know (admitted, never answered) is removed.
  runtime::control_request("/tmp/atp-test-restart-rack0.sock",
                           {{"cmd", "admit"}, {"jobs", control::job_toml([&] {
                              auto j = control::ClusterConfig::parse(a.cluster_toml(), "a").jobs()[0];
                              j.id = 4242;
                              return j;
                            }())}, {"job", 4242}});
  EXPECT_EQ(fabric.switch_jobs().size(), 2u);
  controller.service().reconcile();
  EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{a.job_id()});
}

// The PSs plan on the homes the controller lends (JobBook::homes_to_plan_on): told at every
// admission and removal, and again after a daemon restart put a job back with its own home.
TEST(ControllerService, ThePSsPlanOnTheIdleBlocksTheControllerLends) {
  const std::string text = fabric_text("lending");
  Fabric fabric(text);
  Controller controller(text, "");
  auto ask = [&](const char* daemon, nlohmann::json request) {
    return runtime::control_request("/tmp/atp-test-lending-" + std::string(daemon) + ".sock", request);
  };
  auto home_on = [&](const char* ps, std::uint32_t id) {
    const auto stats = ask(ps, {{"cmd", "stats"}});
    const auto& home = stats.at("stats").at("jobs").at(std::to_string(id)).at("home");
    return std::pair{home.at("first").get<std::uint32_t>(), home.at("count").get<std::uint32_t>()};
  };
  using Home = std::pair<std::uint32_t, std::uint32_t>;
  ControllerClient tenant(controller.address());
  const v1::Admission a = tenant.admit(request(7000));  // on ps0
  EXPECT_EQ(home_on("ps0", a.job_id()), (Home{0, 64}));  // alone: the whole pool
  const v1::Admission b = tenant.admit(request(7100));  // on ps1
  EXPECT_EQ(home_on("ps0", a.job_id()), (Home{0, 16}));  // gave b's home back
  EXPECT_EQ(home_on("ps1", b.job_id()), (Home{16, 48}));
  ControllerClient(controller.address(), b.credential()).remove(b.job_id());
  EXPECT_EQ(home_on("ps0", a.job_id()), (Home{0, 64}));
  fabric.stop();
  fabric.start();  // a restarted PS gets the job back with its own home, then the lent one
  controller.service().reconcile();
  EXPECT_EQ(home_on("ps0", a.job_id()), (Home{0, 64}));

  // What a PS refuses, by name; a switch plans no home.
  const auto beyond = ask("ps0", {{"cmd", "home"}, {"job", a.job_id()}, {"first", 48}, {"count", 32}});
  EXPECT_FALSE(beyond.value("ok", true));
  EXPECT_NE(beyond.value("error", "").find("not within its pool of 64"), std::string::npos) << beyond;
  const auto none = ask("ps1", {{"cmd", "home"}, {"job", a.job_id()}, {"first", 0}, {"count", 8}});
  EXPECT_NE(none.value("error", "").find("is not here"), std::string::npos) << none;
  const auto sw = ask("rack0", {{"cmd", "home"}, {"job", a.job_id()}, {"first", 0}, {"count", 8}});
  EXPECT_NE(sw.value("error", "").find("only a parameter server"), std::string::npos) << sw;
  EXPECT_EQ(home_on("ps0", a.job_id()), (Home{0, 64}));  // unchanged by the refusals
}

// The controller once held one lock across every daemon request: a stopped PS made every
// tenant's RenewLease wait for it (30 s), and a PS answering a byte at a time held every call
// as long as it went on. Now calls that do not program the fabric never wait on a daemon, and
// one that does gets UNAVAILABLE within its budget.
TEST(ControllerService, AStoppedOrTricklingDaemonHoldsNoCallBeyondItsBudget) {
  for (const bool trickle : {false, true}) {
    const std::string text = fabric_text(trickle ? "trickle" : "stopped");
    Fabric fabric(text, "ps1");
    Controller controller(text, "");
    testing::StuckPeer stuck("/tmp/atp-test-" + std::string(trickle ? "trickle" : "stopped") + "-ps1.sock", trickle);
    ControllerClient tenant(controller.address());
    const v1::Admission a = tenant.admit(request(7000));  // on ps0
    std::atomic<bool> admitted{false};
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::thread second([&] {
      v1::AdmitJobRequest both = request(7100);
      both.set_parameter_servers(2);  // needs ps1 too
      code = code_of([&] { ControllerClient(controller.address()).admit(both); });
      admitted = true;
    });
    while (stuck.accepted() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ControllerClient own(controller.address(), a.credential());
    own.renew(a.job_id());
    EXPECT_EQ(own.job(a.job_id()).name(), "job");
    EXPECT_FALSE(admitted) << "a renewal waited for an admission stuck on a daemon";
    second.join();
    EXPECT_EQ(code, grpc::StatusCode::UNAVAILABLE) << (trickle ? "trickling" : "stopped");
    EXPECT_EQ(fabric.switch_jobs(), std::vector<std::uint32_t>{a.job_id()});  // rolled back
  }
}

// Issue 49 item 5: with one of two PSs stopped, the least-loaded pick chose it for every
// admission, each failing UNAVAILABLE after the whole budget. Now the admission that meets it
// lands on the healthy PS within its budget, and the next ones pass the stopped PS over.
TEST(ControllerService, AStoppedPsIsPassedOverAndAdmissionsLandOnAHealthyOne) {
  const std::string text = fabric_text("passover");
  Fabric fabric(text, "ps1");
  Controller controller(text, "");
  testing::StuckPeer stopped("/tmp/atp-test-passover-ps1.sock", false);
  ControllerClient tenant(controller.address());
  const v1::Admission first = tenant.admit(request(7000));  // on ps0: ps1 is then least loaded
  const auto started = std::chrono::steady_clock::now();
  const v1::Admission second = tenant.admit(request(7100));
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(stopped.accepted(), 2) << "asked the stopped PS once (its admission, then the rollback)";
  EXPECT_LT(took, std::chrono::nanoseconds(ControllerService::kCallBudget));
  const v1::Admission third = tenant.admit(request(7200));
  EXPECT_EQ(stopped.accepted(), 2) << "the stopped PS was asked again";
  const std::vector<std::uint32_t> all{first.job_id(), second.job_id(), third.job_id()};
  auto sorted = [](std::vector<std::uint32_t> ids) {
    std::ranges::sort(ids);
    return ids;
  };
  EXPECT_EQ(sorted(fabric.ps_jobs("ps0")), all);
  EXPECT_EQ(sorted(fabric.switch_jobs()), all);
}

}  // namespace
}  // namespace atp::controller
