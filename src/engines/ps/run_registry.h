#pragma once
// Which run a job's workers are in: the PS half of the start-up handshake (protocol.md §7.1).
//
// Each worker process picks a random nonce when it starts and asks PS 0 for its run with it.
// The answer waits until every rank of the job has asked (a barrier): so all workers that ever
// send a fragment of a run are one launch's, one process per rank. A rank asking with a new
// nonce after that was started again, so the job was launched again: the next run begins.
// A new run never meets what the last one left in switches and PSs (proto::wire_tensor), so a
// relaunch on long-lived daemons is never answered with the last launch's results.
#include <cstdint>
#include <optional>
#include <vector>

#include "engines/common.h"

namespace atp::engines {

class RunRegistry {
 public:
  enum class Verdict {
    wait,          // not every rank has asked (recently) yet: no answer
    answer_asker,  // tell the asker `run` (its answer was lost, or it is of the previous run)
    answer_all,    // the barrier is complete: tell every rank (nonces()) `run`
  };
  struct Answer {
    Verdict verdict;
    std::uint16_t run;
  };

  // `first_run`: where this PS starts counting; the daemon picks it at random, so that a
  // restarted PS does not hand out the run its predecessor just used.
  RunRegistry(std::uint16_t first_run, std::uint32_t workers)
      : run_(first_run), ranks_(workers), previous_(workers) {}

  Answer join(std::uint32_t worker, std::uint32_t nonce, Time now) {
    // A late join of the previous run (a duplicate, or an answer lost) is told that run and
    // changes nothing, so it cannot split the current launch.
    if (previous_[worker] == nonce && ranks_[worker].nonce != nonce)
      return {Verdict::answer_asker, static_cast<std::uint16_t>(run_ - 1)};
    if (answered_) {
      if (ranks_[worker].nonce == nonce) return {Verdict::answer_asker, run_};
      // A new process for a rank of an answered run: the job was launched again.
      for (std::size_t i = 0; i < ranks_.size(); ++i) previous_[i] = ranks_[i].nonce;
      for (auto& r : ranks_) r = Rank{};
      ++run_;
      answered_ = false;
    }
    // Nobody was told this run yet, so nobody used it: a newer nonce just replaces an older one.
    ranks_[worker] = Rank{nonce, now};
    for (const Rank& r : ranks_)
      if (!r.nonce || now - r.asked > kJoinCountsFor) return {Verdict::wait, run_};
    answered_ = true;
    return {Verdict::answer_all, run_};
  }

  std::uint16_t run() const { return run_; }
  // Each rank's nonce in the current run (all set once it was answered).
  std::optional<std::uint32_t> nonce(std::uint32_t worker) const { return ranks_[worker].nonce; }

 private:
  struct Rank {
    std::optional<std::uint32_t> nonce;
    Time asked = 0;  // its latest join
  };
  std::uint16_t run_;
  bool answered_ = false;
  std::vector<Rank> ranks_;
  std::vector<std::optional<std::uint32_t>> previous_;  // the last answered run's nonces
};

}  // namespace atp::engines
