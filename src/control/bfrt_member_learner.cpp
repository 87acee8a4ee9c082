// Member learning on a Tofino (issue 49 item 1), as bfrt_python: what `atp p4 agent` does for
// BMv2 through simple_switch_CLI, for a control plane that is the SDE's own shell.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "control/p4_entries.h"

namespace atp::control {

namespace {

// The learner itself. No fmt here: the Python braces stay as they are.
constexpr const char* kLearner = R"PY(
# Member learning: each job's multicast group starts with no port, and a member below joins it
# once the data plane accepted one of the job's packets from its port naming itself (register
# heard, one slot per job and member port). So a job that names another tenant's addresses
# reflects nothing at them, and without this loop no result or float request reaches any
# worker: run it in a long-lived bfrt_python session beside the claim clock. `members` is
# ATP_MEMBERS' form; `members_file`, when given, is a JSON file of that form read again every
# round (what `atp p4 agent --target tofino` keeps current). A silent member is read less and
# less often (from every period_s up to every 64 s), and every period_s again once another
# member of its job is heard. Its heartbeat file, one line "UNIX_TIME heard H of M ok|FAILED
# WHY failures N", is rewritten every round; a failed read or group update is said on stderr
# and tried again the next round.
def learn_members_forever(members=None, members_file=None, period_s=1.0,
                          heartbeat="/run/atp-member-learning", rounds=None):
    import json, sys, time
    heard, reads, written = {}, {}, {}  # per (group, admission): slots heard, read plans, ports
    failures, done, jobs = 0, 0, {}
    while rounds is None or done < rounds:
        done += 1
        state = "ok"
        try:
            if members_file is not None:
                with open(members_file) as f:
                    members = json.load(f)
            jobs = {(int(g), int(j["admission"])): [(int(s), int(p)) for s, p in j["members"]]
                    for g, j in (members if members is not None else ATP_MEMBERS).items()}
            for gone in set(heard) - set(jobs):
                del heard[gone], reads[gone], written[gone]
            now = time.monotonic()
            for job, pairs in jobs.items():
                found = heard.setdefault(job, set())
                plan = reads.setdefault(job, {})
                fresh = False
                for slot, port in pairs:
                    when, every = plan.get(slot, (now, period_s))
                    if slot in found or when > now:
                        continue
                    values = p4.AtpIngress.heard.get(REGISTER_INDEX=slot, from_hw=True,
                                                     print_ents=False).data[b"AtpIngress.heard.f1"]
                    if any(values):
                        found.add(slot)
                        fresh = True
                    else:
                        plan[slot] = (now + every, min(every * 2, 64.0))
                if fresh:
                    plan.clear()
                ports = sorted({port for slot, port in pairs if slot in found})
                if written.get(job, []) != ports:  # the entries create it empty
                    bfrt.pre.node.mod(MULTICAST_NODE_ID=job[0], DEV_PORT=ports)
                    written[job] = ports
        except Exception as e:
            failures += 1
            state = "FAILED " + " ".join(str(e).split())
            print(f"atp member learning: {e} ({failures} failures)", file=sys.stderr, flush=True)
        count = sum(len(found) for found in heard.values())
        total = sum(len(pairs) for pairs in jobs.values())
        atp_heartbeat(heartbeat, f"heard {count} of {total} {state} failures {failures}",
                      "atp member learning")
        time.sleep(period_s)
)PY";

}  // namespace

// A long-lived loop's heartbeat: one line, "UNIX_TIME WHAT", replaced whole (a monitor reads
// its age and its state); a failed write is said on stderr and never ends the loop.
std::string bfrt_heartbeat_helper() {
  return R"PY(
def atp_heartbeat(path, what, who):
    import os, sys, time
    try:
        with open(path + ".tmp", "w") as f:
            f.write(f"{time.time():.3f} {what}\n")
        os.replace(path + ".tmp", path)
    except OSError as e:
        print(f"{who}: heartbeat {path} not written: {e}", file=sys.stderr, flush=True)
)PY";
}

nlohmann::json bfrt_members(const std::vector<P4MulticastGroup>& groups, std::uint64_t admission) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& g : groups) {
    nlohmann::json pairs = nlohmann::json::array();
    for (std::size_t i = 0; i < g.ports.size() && i < g.slots.size(); ++i)
      pairs.push_back({g.slots[i], g.ports[i]});
    out[std::to_string(g.group)] = {{"admission", admission}, {"members", pairs}};
  }
  return out;
}

std::string bfrt_member_learner(const nlohmann::json& members) {
  return fmt::format(
             "\n# The groups and the [heard slot, port] of each member below, as the entries "
             "above set them.\nATP_MEMBERS = {}\n",
             members.dump()) +
         kLearner;
}

}  // namespace atp::control
