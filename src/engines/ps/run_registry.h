#pragma once
// Which run a job's workers are in: the PS half of the start-up handshake (protocol.md §7.1).
//
// Each worker process picks a random nonce when it starts and asks PS 0 for its run with it,
// again at least every kJoinRepeatAtMost until answered. PS 0 answers a run only when every
// rank is held by exactly one live process: every rank asked within kJoinCountsFor, no rank was
// claimed by two nonces in that time, and then every rank asked once more (a process that died
// cannot). So the processes that send a run's fragments are one per rank and all alive at the
// answer. Afterwards, a rank asking with a new nonce was started again, so the job was launched
// again: the next run begins. A new run never meets what the last one left in switches and PSs
// (proto::wire_tensor), so a relaunch on long-lived daemons is never answered with the last
// launch's results.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "engines/common.h"

namespace atp::engines {

class RunRegistry {
 public:
  enum class Verdict {
    wait,          // not yet: no answer
    answer_asker,  // tell the asker `run` (its answer was lost, or it is of an earlier run)
    answer_all,    // tell every rank (nonce()) `run`
  };
  struct Answer {
    Verdict verdict;
    std::uint16_t run;
  };

  // Answered nonces remembered per rank: a join of one of the last this many launches (a
  // duplicate, or an answer lost) is told its own run and changes nothing.
  static constexpr std::size_t kRunsRemembered = 8;

  // `first_run`: where this PS starts counting; the daemon picks it at random, so that a
  // restarted PS does not hand out the run its predecessor just used.
  RunRegistry(std::uint16_t first_run, std::uint32_t workers)
      : run_(first_run), ranks_(workers), told_(workers) {}

  Answer join(std::uint32_t worker, std::uint32_t nonce, Time now) {
    const auto& told = told_[worker];
    const auto known = std::find_if(told.begin(), told.end(),
                                    [&](const auto& t) { return t.first == nonce; });
    if (known != told.end()) return {Verdict::answer_asker, known->second};
    if (answered_) {
      // A new process for a rank of an answered run: the job was launched again.
      for (auto& r : ranks_) r = Rank{};
      ++run_;
      answered_ = false;
      confirming_since_.reset();
    }

    // Nobody was told this run yet, so nobody used it: a rank's nonce may still change.
    Rank& r = ranks_[worker];
    if (r.nonce == nonce) {
      r.confirmed = confirming_since_ && now > *confirming_since_;
    } else {
      // Two processes claim this rank while the other still asks: wait until one is gone (a
      // live one asks again within kJoinRepeatAtMost, and so renews the contest).
      if (r.nonce && now - r.asked <= kJoinCountsFor) r.contested_until = r.asked + kJoinCountsFor;
      r.nonce = nonce;
      r.confirmed = false;
      confirming_since_.reset();
    }
    r.asked = now;

    for (const Rank& x : ranks_)
      if (!x.nonce || now - x.asked > kJoinCountsFor || now < x.contested_until) {
        confirming_since_.reset();
        return {Verdict::wait, run_};
      }
    // Every rank looks held by one live process: confirm it by each asking once more.
    if (!confirming_since_) {
      confirming_since_ = now;
      for (auto& x : ranks_) x.confirmed = false;
      return {Verdict::wait, run_};
    }
    for (const Rank& x : ranks_)
      if (!x.confirmed) return {Verdict::wait, run_};
    answered_ = true;
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      told_[i].emplace_back(*ranks_[i].nonce, run_);
      if (told_[i].size() > kRunsRemembered) told_[i].pop_front();
    }
    return {Verdict::answer_all, run_};
  }

  std::uint16_t run() const { return run_; }
  // Each rank's nonce in the current run (all set once it was answered).
  std::optional<std::uint32_t> nonce(std::uint32_t worker) const { return ranks_[worker].nonce; }

 private:
  struct Rank {
    std::optional<std::uint32_t> nonce;
    Time asked = 0;            // its latest join
    // Another nonce claimed the rank until then.
    Time contested_until = std::numeric_limits<Time>::min();
    bool confirmed = false;    // asked again since confirming_since_
  };
  std::uint16_t run_;
  bool answered_ = false;
  std::optional<Time> confirming_since_;  // when every rank last began to look settled
  std::vector<Rank> ranks_;
  std::vector<std::deque<std::pair<std::uint32_t, std::uint16_t>>> told_;  // nonce, its run
};

}  // namespace atp::engines
