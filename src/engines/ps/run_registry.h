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
    refuse,        // tell the asker its claim of `run` is refused (claim)
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

  // A run the launcher named, claimed by rank `worker` with its launch's `nonce`: told back
  // unless another launch of the job used it on this PS (a run this registry handed out, or
  // one a rank claimed with another nonce), then refused. The claims of the last
  // kRunsRemembered claimed runs keep each rank's nonce, so a rank's repeated claim is told
  // again; an older run, and every run handed out, is refused to any claim.
  Answer claim(std::uint32_t worker, std::uint32_t nonce, std::uint16_t run) {
    const auto known = std::find_if(claims_.begin(), claims_.end(),
                                    [&](const Claim& c) { return c.run == run; });
    if (known != claims_.end()) {
      std::uint32_t& held = known->nonces[worker];
      if (held != 0 && held != nonce) return {Verdict::refuse, run};
      held = nonce;
      return {Verdict::answer_asker, run};
    }
    if (used_[run]) return {Verdict::refuse, run};
    used_[run] = true;
    if (run == run_) next_run();  // nobody was told it (else it would be used): move on
    claims_.push_back({run, std::vector<std::uint32_t>(ranks_.size(), 0)});
    claims_.back().nonces[worker] = nonce;
    if (claims_.size() > kRunsRemembered) claims_.pop_front();
    return {Verdict::answer_asker, run};
  }

  Answer join(std::uint32_t worker, std::uint32_t nonce, Time now) {
    const auto& told = told_[worker];
    const auto known = std::find_if(told.begin(), told.end(),
                                    [&](const auto& t) { return t.first == nonce; });
    if (known != told.end()) return {Verdict::answer_asker, known->second};
    if (answered_) next_run();  // a new process for a rank of an answered run: a new launch

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
    used_[run_] = true;
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      told_[i].emplace_back(*ranks_[i].nonce, run_);
      if (told_[i].size() > kRunsRemembered) told_[i].pop_front();
    }
    return {Verdict::answer_all, run_};
  }

  std::uint16_t run() const { return run_; }
  bool used(std::uint16_t run) const { return used_[run]; }
  // Each rank's nonce in the current run (all set once it was answered).
  std::optional<std::uint32_t> nonce(std::uint32_t worker) const { return ranks_[worker].nonce; }

 private:
  // The next run nobody used (handed out or claimed), its ranks fresh.
  void next_run() {
    for (int tried = 0; tried < 65536 && used_[run_]; ++tried) ++run_;
    for (auto& r : ranks_) r = Rank{};
    answered_ = false;
    confirming_since_.reset();
  }
  struct Claim {
    std::uint16_t run;
    std::vector<std::uint32_t> nonces;  // per rank; 0: not claimed yet
  };
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
  std::vector<bool> used_ = std::vector<bool>(65536, false);  // runs handed out or claimed
  std::deque<Claim> claims_;                                  // the last kRunsRemembered claimed
};

}  // namespace atp::engines
