#pragma once
// Which run a job's workers are in: the PS half of the start-up handshake.
//
// Each worker process picks a random nonce when it starts and asks PS 0 for its run with it.
// Workers of one launch all meet the same run; a worker that asks with a new nonce where its
// rank already holds another was restarted, so the job was launched again: a new run begins.
// A new run never meets what the last one left in switches and PSs (proto::wire_tensor), so a
// relaunch on long-lived daemons cannot be answered with the last launch's results.
#include <cstdint>
#include <optional>
#include <vector>

namespace atp::engines {

class RunRegistry {
 public:
  // `first_run`: where this PS starts counting; the daemon picks it at random, so that a
  // restarted PS does not hand out the run its predecessor just used.
  RunRegistry(std::uint16_t first_run, std::uint32_t workers)
      : run_(first_run), nonce_of_(workers), previous_nonce_of_(workers) {}

  // The run of `worker` (its index in the job) asking with `nonce`. Asking again with the same
  // nonce (a lost answer) gets the same run. A late join of the previous launch (a duplicate,
  // or a worker of it still starting) gets the previous run and leaves the current one alone,
  // so it cannot split the current launch over two runs.
  std::uint16_t join(std::uint32_t worker, std::uint32_t nonce) {
    if (previous_nonce_of_[worker] == nonce && nonce_of_[worker] != nonce)
      return static_cast<std::uint16_t>(run_ - 1);
    if (nonce_of_[worker] && *nonce_of_[worker] != nonce) {
      ++run_;
      previous_nonce_of_.swap(nonce_of_);
      for (auto& n : nonce_of_) n.reset();
    }
    nonce_of_[worker] = nonce;
    return run_;
  }

  std::uint16_t run() const { return run_; }

 private:
  std::uint16_t run_;
  std::vector<std::optional<std::uint32_t>> nonce_of_, previous_nonce_of_;
};

}  // namespace atp::engines
