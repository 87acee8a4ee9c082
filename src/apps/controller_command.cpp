// `atp controller`: the long-lived service that admits jobs onto a fabric (controller.proto),
// until SIGINT/SIGTERM. Leases are reaped and the daemons re-checked in the main thread,
// between signals.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include "apps/commands.h"
#include "apps/secret_file.h"
#include "controller/controller_client.h"
#include "controller/controller_service.h"
#include "runtime/event_loop.h"

namespace atp::apps {

namespace {

struct ControllerOptions {
  std::string fabric, listen = "127.0.0.1:50051", state, operator_file, admit_file, port_file;
  std::string tls_cert, tls_key, daemon_secret_file;
  std::string log_level = "info";
  unsigned default_lease_s = 30, max_lease_s = 3600, static_share = 4, check_every_s = 5,
           max_window = 4096;
  bool keep_homes = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// TLS with the given certificate and key, or plaintext.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const ControllerOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty())
    throw std::invalid_argument("--tls-cert-file and --tls-key-file go together");
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({controller::read_pem(o.tls_key), controller::read_pem(o.tls_cert)});
  return grpc::SslServerCredentials(options);
}

void serve(const ControllerOptions& o) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  controller::Limits limits;
  limits.default_lease = Duration{o.default_lease_s} * kSecond;
  limits.max_lease = Duration{o.max_lease_s} * kSecond;
  limits.static_share = o.static_share;
  limits.max_window = o.max_window;
  const std::string fabric = read_file(o.fabric);
  std::vector<controller::Tenant> tenants = controller::parse_tenants(fabric, o.fabric);
  for (auto& t : tenants) {
    t.credential = read_secret_file(t.credential_file, "tenant '" + t.name + "' credential");
    limits.quotas[t.name] = t.quota;
  }
  controller::JobBook book(fabric, o.fabric, limits);
  if (!o.state.empty()) {
    book.load(o.state, controller::instant_now());
    book.save(o.state, controller::instant_now());  // a restart grace is given once, for good
  }
  const std::size_t recovered = book.ids().size();
  const std::string operator_credential = read_secret_file(o.operator_file, "operator credential");
  const std::string admit_credential = read_secret_file(o.admit_file, "admission credential");
  controller::require_distinct_credentials(tenants, admit_credential, operator_credential);
  controller::ControllerService service(
      std::move(book), {o.state, operator_credential, admit_credential,
                        read_secret_file(o.daemon_secret_file, "daemon control secret"),
                        std::move(tenants), o.keep_homes});
  for (const auto& line : service.reconcile()) spdlog::info("controller: {}", line);

  // Signals are taken by sigtimedwait below, never by a handler on a gRPC thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen, server_credentials(o), &port);
  builder.SetMaxReceiveMessageSize(controller::kMaxRequestBytes);
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) throw std::invalid_argument("cannot listen on " + o.listen);
  const std::string bound = o.listen.substr(0, o.listen.rfind(':')) + ":" + std::to_string(port);
  if (!o.port_file.empty()) std::ofstream(o.port_file) << bound << "\n";
  spdlog::info("controller serving {} on {}{} ({} jobs recovered{})", o.fabric, bound,
               o.tls_cert.empty() ? " (plaintext)" : " (TLS)", recovered,
               o.state.empty() ? ", no state file: jobs die with it" : ", state in " + o.state);

  const timespec tick{1, 0};
  for (unsigned ticks = 1;; ++ticks) {
    if (sigtimedwait(&stop, nullptr, &tick) > 0) break;
    service.reap(runtime::monotonic_now());
    if (ticks % o.check_every_s == 0)
      for (const auto& line : service.reconcile()) spdlog::info("controller: {}", line);
  }
  spdlog::info("controller stopping; its jobs keep running on the daemons");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace

void add_controller_command(CLI::App& app) {
  static ControllerOptions o;
  auto* c = app.add_subcommand("controller",
                               "Run the controller: admits jobs onto a fabric at run time (gRPC)");
  c->add_option("--config", o.fabric, "Fabric file: switches and parameter servers, no jobs")
      ->required()->check(CLI::ExistingFile);
  c->add_option("--listen", o.listen, "host:port to serve gRPC on (port 0: any free one)")
      ->capture_default_str();
  c->add_option("--state", o.state,
                "Durable state file: admitted jobs survive a restart (recommended)");
  c->add_option("--operator-credential-file", o.operator_file,
                "File whose first line is the operator's credential (ListJobs, any job)");
  c->add_option("--admit-credential-file", o.admit_file,
                "File whose first line admission requests must present (default: none needed)");
  c->add_option("--daemon-secret-file", o.daemon_secret_file,
                "File whose first line is the secret of daemons controlled over TCP (control = "
                "\"tcp://...\" in the fabric)");
  c->add_option("--default-lease-s", o.default_lease_s, "Lease of a job that names none")
      ->capture_default_str()->check(CLI::Range(1u, 86400u));
  c->add_option("--max-lease-s", o.max_lease_s, "Longest lease a job may ask for")
      ->capture_default_str()->check(CLI::Range(1u, 86400u));
  c->add_option("--static-share", o.static_share,
                "A job naming no static slice gets 1/N of each switch thread's pool; under the "
                "atp policy each job's home (planned placement) is 1/N of the pool too")
      ->capture_default_str()->check(CLI::Range(1u, 1024u));
  c->add_flag("--keep-homes", o.keep_homes,
              "Every job plans on its own home only (by default the blocks of a pool no job "
              "holds are lent to the jobs next to them, and taken back as jobs arrive: "
              "docs/sharing.md)");
  c->add_option("--max-window", o.max_window,
                "Largest window a job may ask for (its PSs allocate state for it at admission)")
      ->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  c->add_option("--check-every-s", o.check_every_s,
                "Re-check that every daemon holds its jobs this often (a restarted one gets them back)")
      ->capture_default_str()->check(CLI::Range(1u, 3600u));
  c->add_option("--tls-cert-file", o.tls_cert,
                "PEM certificate to serve TLS with (its name must match what clients dial)")
      ->check(CLI::ExistingFile);
  c->add_option("--tls-key-file", o.tls_key, "PEM private key of --tls-cert-file")
      ->check(CLI::ExistingFile);
  c->add_option("--port-file", o.port_file, "Write host:port served here once listening");
  c->add_option("--log-level", o.log_level, "trace, debug, info, warn, error")->capture_default_str();
  c->callback([] { serve(o); });
}

}  // namespace atp::apps
