// `atp job`: a tenant's or operator's client of `atp controller`. Admission prints the job's
// id, credential and run as JSON (and writes the job's cluster file if asked); with
// --keep-alive it then holds the job's lease until SIGINT/SIGTERM and removes the job, so a
// launcher that wraps its workers in it leaves nothing behind (and a killed one's job lapses).
#include <grpcpp/grpcpp.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "control/private_file.h"
#include "controller/controller_client.h"

namespace atp::apps {

namespace {

struct JobOptions {
  std::string controller = "127.0.0.1:50051", credential_file, name, cluster_out, tls_ca;
  std::vector<std::string> workers;  // RACK=IP:PORT
  std::uint32_t job = 0;
  controller::JobTerms terms;
  bool keep_alive = false;
};

// The credential: --credential-file's first line, else $ATP_CREDENTIAL (never a plain option:
// command lines are visible to every user of the host).
std::string credential(const JobOptions& o) {
  if (!o.credential_file.empty()) {
    std::ifstream in(o.credential_file);
    std::string line;
    if (!in || !std::getline(in, line)) throw std::invalid_argument(o.credential_file + ": cannot read");
    return line;
  }
  const char* env = std::getenv("ATP_CREDENTIAL");
  return env ? env : "";
}

nlohmann::json status_json(const controller::v1::JobStatus& s) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : s.workers()) workers.push_back({{"rack", w.rack()}, {"address", w.address()}});
  nlohmann::json out = {{"job", s.job_id()}, {"name", s.name()}, {"workers", workers},
                        {"lease_seconds_left", s.lease_seconds_left()},
                        {"switches", s.switches()}, {"parameter_servers", s.parameter_servers()}};
  if (!s.stats_json().empty()) out["stats"] = nlohmann::json::parse(s.stats_json());
  return out;
}

controller::v1::AdmitJobRequest admission_request(const JobOptions& o) {
  controller::v1::AdmitJobRequest r;
  r.set_name(o.name);
  for (const auto& w : o.workers) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--worker takes RACK=IP:PORT, not '" + w + "'");
    auto* e = r.add_workers();
    e->set_rack(w.substr(0, eq));
    e->set_address(w.substr(eq + 1));
  }
  controller::set_terms(r, o.terms);
  return r;
}

// Renews every third of the lease until a signal, then removes the job.
void hold(controller::ControllerClient& client, std::uint32_t job, std::uint32_t lease_s) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  const timespec every{std::max<std::uint32_t>(lease_s / 3, 1), 0};
  while (sigtimedwait(&stop, nullptr, &every) < 0) {
    try {
      client.renew(job);
    } catch (const controller::ControllerCallError& e) {
      // The controller restarting: try again next time. The job gone: nothing left to hold.
      std::cerr << "atp job: " << e.what() << "\n";
      if (e.code == grpc::StatusCode::NOT_FOUND || e.code == grpc::StatusCode::PERMISSION_DENIED)
        throw;
    }
  }
  client.remove(job);
}

void admit(const JobOptions& o) {
  controller::ControllerClient client(o.controller, credential(o), o.tls_ca);
  const auto a = client.admit(admission_request(o));
  nlohmann::json out = {{"job", a.job_id()}, {"credential", a.credential()}, {"run", a.run()},
                        {"lease_seconds", a.lease_seconds()}};
  if (!o.cluster_out.empty()) {
    control::write_private_file(o.cluster_out, a.cluster_toml());  // it holds the job's token
    out["cluster_file"] = o.cluster_out;
  }
  std::cout << out.dump() << std::endl;
  if (!o.keep_alive) return;
  client.set_credential(a.credential());
  hold(client, a.job_id(), a.lease_seconds());
}

void run(const std::function<void()>& body) {
  try {
    body();
  } catch (const controller::ControllerCallError& e) {
    std::cerr << "atp job: " << e.what() << "\n";
    set_exit_code(e.code == grpc::StatusCode::UNAVAILABLE ? 3 : 1);
  }
}

}  // namespace

void add_job_command(CLI::App& app) {
  static JobOptions o;
  auto* job = app.add_subcommand("job", "Admit, inspect and remove jobs through `atp controller`");
  job->add_option("--controller", o.controller, "The controller's host:port")->capture_default_str();
  job->add_option("--credential-file", o.credential_file,
                  "File whose first line is the credential to present (else $ATP_CREDENTIAL)");
  job->add_option("--tls-ca-file", o.tls_ca,
                  "PEM certificate that signed the controller's: talk TLS (default: plaintext)")
      ->check(CLI::ExistingFile);
  job->require_subcommand(1);

  auto* admit_cmd = job->add_subcommand("admit", "Admit a job; prints its id and credential");
  admit_cmd->add_option("--worker", o.workers, "RACK=IP:PORT of each worker, in rank order")->required();
  admit_cmd->add_option("--name", o.name, "A name shown by `atp job list`");
  admit_cmd->add_option("--values-per-packet", o.terms.values_per_packet, "K (default: the rack switches')");
  admit_cmd->add_option("--window", o.terms.window, "Fragments in flight per worker (default 64)");
  admit_cmd->add_option("--parameter-servers", o.terms.parameter_servers, "PS shards (default 1)");
  admit_cmd->add_option("--max-gradient", o.terms.max_gradient, "Largest |gradient| expected (default 1)");
  admit_cmd->add_option("--lease-s", o.terms.lease_seconds, "Lease (default: the controller's)");
  admit_cmd->add_option("--deadline-ms", o.terms.deadline_ms, "Allreduce deadline (default 30000)");
  admit_cmd->add_option("--static-aggregators", o.terms.static_aggregators, "Static policy: aggregators per switch thread");
  admit_cmd->add_option("--cluster-out", o.cluster_out, "Write the job's cluster file here");
  admit_cmd->add_flag("--keep-alive", o.keep_alive,
                      "Hold the lease until SIGINT/SIGTERM, then remove the job");
  admit_cmd->callback([] { run([] { admit(o); }); });

  auto by_id = [&](const char* name, const char* help, auto action) {
    auto* cmd = job->add_subcommand(name, help);
    cmd->add_option("--job", o.job, "Job id")->required();
    cmd->callback([action] {
      run([action] {
        controller::ControllerClient client(o.controller, credential(o), o.tls_ca);
        action(client);
      });
    });
  };
  by_id("show", "A job's description and counters (job or operator credential)", [](auto& c) {
    std::cout << status_json(c.job(o.job)).dump(2) << "\n";
  });
  by_id("renew", "Renew a job's lease", [](auto& c) {
    std::cout << nlohmann::json{{"lease_seconds", c.renew(o.job).lease_seconds()}}.dump() << "\n";
  });
  by_id("remove", "Remove a job from every switch and PS", [](auto& c) {
    c.remove(o.job);
    std::cout << nlohmann::json{{"removed", o.job}}.dump() << "\n";
  });
  job->add_subcommand("list", "Every admitted job (operator credential)")->callback([] {
    run([] {
      controller::ControllerClient client(o.controller, credential(o), o.tls_ca);
      const auto list = client.list();  // (a range-for over a temporary's field would dangle)
      nlohmann::json jobs = nlohmann::json::array();
      for (const auto& s : list.jobs()) jobs.push_back(status_json(s));
      std::cout << jobs.dump(2) << "\n";
    });
  });
  job->add_subcommand("fabric", "The fabric's switches and parameter servers")->callback([] {
    run([] {
      controller::ControllerClient client(o.controller, credential(o), o.tls_ca);
      const auto fabric = client.fabric();
      nlohmann::json out = nlohmann::json::array();
      for (const auto& s : fabric.switches())
        out.push_back({{"name", s.name()}, {"address", s.address()}, {"level", s.level()},
                       {"aggregators", s.aggregators()}, {"policy", s.policy()}});
      std::cout << out.dump(2) << "\n";
    });
  });
}

}  // namespace atp::apps
