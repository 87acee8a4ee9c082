#pragma once
// How the processes of a training job become one ATP job without a hand-written worker list:
// through the key-value store their launcher already shares (torchrun's rendezvous store).
//
//   every rank   binds its UDP socket and publishes {rack, address, host} under atp/worker/RANK
//   rank 0       reads them all, asks the controller to admit the job (or, with no controller
//                named, starts a LocalFabric in its own process), and publishes the answer,
//                or the refusal with its reason, under atp/admission
//   every rank   reads the answer and builds its Communicator from the job's cluster file
//
// Rank 0 then holds the job's lease (renewing it every third of its length) and, at close(),
// waits for every rank's atp/done/RANK (bounded) before it removes the job or stops the fabric.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "controller/job_terms.h"
#include "libatp/communicator.h"

namespace atp {

namespace controller {
class ControllerClient;
}
class LocalFabric;

// The launcher's store, as the rendezvous needs it (torch's c10d::Store in the backend).
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until the key exists (the store's own timeout applies).
  virtual std::string get(const std::string& key) = 0;
  // Whether every key exists within `timeout`.
  virtual bool wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Deletes the key if it exists.
  virtual void remove(const std::string& key) = 0;
};

struct RendezvousSettings {
  std::string controller;   // host:port; empty: a LocalFabric in rank 0's process
  std::string credential;   // presented to AdmitJob if the controller asks for one
  std::string tls_ca_file;  // the CA of the controller's TLS certificate (empty: plaintext)
  std::string rack;         // this rank's rack switch (default: the fabric's only one)
  std::string worker_ip;    // the address to bind (default: the one routed to the rack switch)
  std::string name;         // the job's name in `atp job list`
  controller::JobTerms terms;  // K, window, PS shards, ... (zeros: the defaults)
  std::chrono::milliseconds close_wait{10000};  // how long rank 0 waits for the others at close
};

class JobRendezvous {
 public:
  // Joins (see above); throws std::runtime_error with the reason (the controller's refusal,
  // an unknown rack, a local run across hosts, ...) on every rank.
  JobRendezvous(RendezvousStore& store, int rank, int size, const RendezvousSettings& settings);
  ~JobRendezvous();

  Communicator& communicator() { return *communicator_; }
  std::uint32_t job() const { return job_; }
  // Marks this rank done; rank 0 waits for the others, then removes the job. Idempotent.
  void close();

 private:
  runtime::UdpSocket bind_socket(const RendezvousSettings& s, std::string& rack);
  // Builds this rank's Communicator from rank 0's answer (or raises its refusal).
  void join(const std::string& admission, runtime::UdpSocket socket);
  std::string admit(int size, const RendezvousSettings& s);
  void keep_lease(std::uint32_t lease_seconds);

  RendezvousStore& store_;
  int rank_, size_;
  std::chrono::milliseconds close_wait_;
  std::uint32_t job_ = 0;
  std::uint32_t lease_seconds_ = 0;
  std::unique_ptr<controller::ControllerClient> client_;  // rank 0 with a controller
  std::unique_ptr<LocalFabric> local_;                    // rank 0 without one
  std::unique_ptr<Communicator> communicator_;
  std::thread lease_keeper_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool closed_ = false;
};

}  // namespace atp
