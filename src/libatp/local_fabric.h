#pragma once
// A fabric of one rack switch and one parameter server on loopback, inside the calling
// process: what a single-machine run of the torch.distributed backend uses when no controller
// is named, so `init_process_group("atp")` works out of the box. The daemons are the real ones
// (the same pipeline and PS as `atp switch` / `atp ps`), on their own event loop thread.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/cluster_config.h"
#include "daemons/ps_daemon.h"
#include "daemons/switch_daemon.h"
#include "runtime/event_loop.h"

namespace atp {

struct LocalJob {
  std::vector<runtime::Endpoint> workers;  // rank order, all on this machine
  std::uint16_t values_per_packet = 256;
  std::uint32_t window = 64, aggregators = 1024;
  float max_gradient = 1;
  Duration deadline = 30 * kSecond;
};

class LocalFabric {
 public:
  // Starts the switch and the PS with the job installed (id 1, a random token).
  explicit LocalFabric(const LocalJob& job);
  ~LocalFabric();
  LocalFabric(const LocalFabric&) = delete;
  LocalFabric& operator=(const LocalFabric&) = delete;

  // The cluster file its workers read: the fabric and the job.
  const std::string& cluster_text() const { return text_; }
  static constexpr std::uint32_t kJob = 1;

 private:
  std::string text_;
  runtime::EventLoop loop_;
  std::unique_ptr<daemons::SwitchDaemon> switch_;
  std::unique_ptr<daemons::PsDaemon> ps_;
  std::thread thread_;
};

}  // namespace atp
