#include "libatp/job_rendezvous.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "controller/controller_client.h"
#include "libatp/local_fabric.h"

namespace atp {

namespace {

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// The local address the kernel would send from to reach `to`: the worker's address as its rack
// switch sees it.
std::uint32_t address_toward(const runtime::Endpoint& to) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = to.sockaddr();
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("ATP: no route to the rack switch at " + to.str());
  return ntohl(local.sin_addr.s_addr);
}

// The rack this rank attaches to: the one asked for, or the fabric's only one.
const controller::v1::SwitchInfo& pick_rack(const controller::v1::Fabric& fabric,
                                           const std::string& wanted) {
  std::vector<const controller::v1::SwitchInfo*> racks;
  std::string names;
  for (const auto& s : fabric.switches())
    if (s.level() == 1) {
      if (s.name() == wanted) return s;
      racks.push_back(&s);
      names += (names.empty() ? "" : ", ") + s.name();
    }
  if (wanted.empty() && racks.size() == 1) return *racks[0];
  throw std::runtime_error(
      "ATP: " + (wanted.empty() ? std::string("the fabric has several racks")
                                : "the fabric has no rack switch '" + wanted + "'") +
      "; set ATP_RACK to one of: " + names);
}

controller::v1::AdmitJobRequest admission_request(const std::vector<nlohmann::json>& workers,
                                                  const RendezvousSettings& s) {
  controller::v1::AdmitJobRequest r;
  r.set_name(s.name.empty() ? "torch@" + workers[0].at("host").get<std::string>() : s.name);
  for (const auto& w : workers) {
    auto* e = r.add_workers();
    e->set_rack(w.at("rack").get<std::string>());
    e->set_address(w.at("address").get<std::string>());
  }
  controller::set_terms(r, s.terms);
  return r;
}

}  // namespace

JobRendezvous::JobRendezvous(RendezvousStore& store, int rank, int size,
                             const RendezvousSettings& settings)
    : store_(store), rank_(rank), size_(size), close_wait_(settings.close_wait) {
  std::string rack;
  runtime::UdpSocket socket = bind_socket(settings, rack);
  store_.set("atp/worker/" + std::to_string(rank),
             nlohmann::json{{"rack", rack}, {"address", socket.local().str()}, {"host", host_name()}}
                 .dump());
  if (rank != 0) {
    join(store_.get("atp/admission"), std::move(socket));
    return;
  }
  std::string admission;
  try {
    admission = admit(size, settings);
  } catch (const std::exception& e) {
    store_.set("atp/admission", nlohmann::json{{"ok", false}, {"error", e.what()}}.dump());
    throw;
  }
  try {
    store_.set("atp/admission", admission);
    join(admission, std::move(socket));
  } catch (...) {
    try {
      if (client_) client_->remove(job_);  // admitted, but this process cannot take part
    } catch (const std::exception& e) {
      std::cerr << "ATP: removing job " << job_ << " after a failed start: " << e.what() << "\n";
    }
    throw;
  }
  if (client_)
    lease_keeper_ = std::thread([this, lease = lease_seconds_] { keep_lease(lease); });
}

void JobRendezvous::join(const std::string& admission, runtime::UdpSocket socket) {
  const auto answer = nlohmann::json::parse(admission);
  if (!answer.at("ok").get<bool>())
    throw std::runtime_error("ATP: rank 0 could not start the job: " +
                             answer.at("error").get<std::string>());
  job_ = answer.at("job").get<std::uint32_t>();
  const auto cluster = control::ClusterConfig::parse(answer.at("cluster").get<std::string>(),
                                                     "job " + std::to_string(job_));
  runtime::AddressBook book;
  engines::WorkerConfig config = cluster.worker_config(job_, static_cast<std::size_t>(rank_), book);
  config.run = answer.at("run").get<std::uint16_t>();  // each admission is a fresh job
  communicator_ = std::make_unique<Communicator>(config, std::move(socket), std::move(book),
                                                 cluster.rank_positions(job_));
}

JobRendezvous::~JobRendezvous() {
  try {
    close();
  } catch (const std::exception& e) {
    std::cerr << "ATP: closing job " << job_ << ": " << e.what() << "\n";
  }
}

runtime::UdpSocket JobRendezvous::bind_socket(const RendezvousSettings& s, std::string& rack) {
  std::uint32_t ip = 0x7F000001;
  if (!s.controller.empty()) {
    const auto fabric = controller::ControllerClient(s.controller, {}, s.tls_ca_file).fabric();
    const auto& sw = pick_rack(fabric, s.rack);
    rack = sw.name();
    ip = address_toward(runtime::Endpoint::parse_or_throw(sw.address(), "rack switch address"));
  } else {
    rack = "local-rack";
  }
  if (!s.worker_ip.empty())
    ip = runtime::Endpoint::parse_or_throw(s.worker_ip + ":0", "ATP_WORKER_IP").ip;
  return runtime::UdpSocket(runtime::Endpoint{ip, 0});
}

std::string JobRendezvous::admit(int size, const RendezvousSettings& s) {
  std::vector<nlohmann::json> workers;
  for (int r = 0; r < size; ++r)
    workers.push_back(nlohmann::json::parse(store_.get("atp/worker/" + std::to_string(r))));
  if (s.controller.empty()) {
    LocalJob job;
    for (const auto& w : workers) {
      if (w.at("host") != workers[0].at("host"))
        throw std::runtime_error("ATP: ranks on several hosts (" + workers[0].at("host").get<std::string>() +
                                 ", " + w.at("host").get<std::string>() +
                                 ") need a controller: set ATP_CONTROLLER=host:port");
      job.workers.push_back(runtime::Endpoint::parse_or_throw(w.at("address").get<std::string>(), "worker"));
    }
    const controller::JobTerms& t = s.terms;
    if (t.values_per_packet) job.values_per_packet = static_cast<std::uint16_t>(t.values_per_packet);
    if (t.window) job.window = t.window;
    if (t.max_gradient > 0) job.max_gradient = t.max_gradient;
    if (t.deadline_ms) job.deadline = Duration{t.deadline_ms} * kMillisecond;
    local_ = std::make_unique<LocalFabric>(job);
    return nlohmann::json{{"ok", true}, {"job", LocalFabric::kJob}, {"run", 0},
                          {"cluster", local_->cluster_text()}}.dump();
  }
  client_ = std::make_unique<controller::ControllerClient>(s.controller, s.credential, s.tls_ca_file);
  const auto a = client_->admit(admission_request(workers, s));
  client_->set_credential(a.credential());
  job_ = a.job_id();
  lease_seconds_ = a.lease_seconds();
  return nlohmann::json{{"ok", true}, {"job", a.job_id()}, {"run", a.run()},
                        {"cluster", a.cluster_toml()}}.dump();
}

void JobRendezvous::keep_lease(std::uint32_t lease_seconds) {
  const auto every = std::chrono::milliseconds(std::max<std::uint32_t>(lease_seconds, 1) * 1000 / 3);
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, every, [this] { return closed_; })) {
    lock.unlock();  // close() must not wait for a renewal's round trip
    try {
      client_->renew(job_);
    } catch (const std::exception& e) {
      std::cerr << "ATP: renewing job " << job_ << "'s lease: " << e.what() << "\n";
    }
    lock.lock();
  }
}

void JobRendezvous::close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
  }
  stop_.notify_all();
  if (lease_keeper_.joinable()) lease_keeper_.join();
  store_.set("atp/done/" + std::to_string(rank_), "1");
  if (rank_ != 0) return;
  // The others may still be waiting for a resend through this process's fabric.
  std::vector<std::string> done;
  for (int r = 1; r < size_; ++r) done.push_back("atp/done/" + std::to_string(r));
  if (!done.empty() && !store_.wait(done, close_wait_))
    std::cerr << "ATP: not every rank closed within " << close_wait_.count()
              << " ms; removing job " << job_ << " anyway\n";
  communicator_.reset();
  local_.reset();
  // The launcher's store may outlive this group (a later init_process_group in the same
  // processes): it must not find this job's answers there.
  for (int r = 0; r < size_; ++r) {
    store_.remove("atp/worker/" + std::to_string(r));
    store_.remove("atp/done/" + std::to_string(r));
  }
  store_.remove("atp/admission");
  if (client_) client_->remove(job_);
}

}  // namespace atp
