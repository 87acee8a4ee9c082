"""Member learning on a Tofino (issue 49 item 1): `learn_members_forever` of the bfrt_python
script `atp p4 config --target tofino` writes, run over a stand-in for the SDE's bfrt objects. A
job's multicast group starts with no port and gains a member's port once the data plane set its
heard slot. (A BMv2 switch learns through its `atp p4 agent`: tests/p4_switch_agent_test.cpp.)"""
import subprocess
import types
from collections import Counter
from pathlib import Path

import atp.launch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "p4_two_racks.toml"


class Heard:
    """Register AtpIngress.heard: one value per pipe; the data plane's writes are `values`."""

    def __init__(self):
        self.values, self.reads, self.cleared = {}, Counter(), []

    def get(self, REGISTER_INDEX, from_hw, print_ents):
        assert from_hw and not print_ents
        self.reads[REGISTER_INDEX] += 1
        pipe = self.values.get(REGISTER_INDEX, 0)
        return types.SimpleNamespace(data={b"AtpIngress.heard.f1": [0, pipe, 0, 0]})

    def mod(self, REGISTER_INDEX, f1):
        self.cleared.append(REGISTER_INDEX)
        self.values[REGISTER_INDEX] = f1


class Nodes:
    """bfrt.pre.node: each node's ports; `refusals` updates fail first."""

    def __init__(self, refusals=0):
        self.ports, self.mods, self.refusals, self.on_mod = {}, [], refusals, None

    def add(self, MULTICAST_NODE_ID, MULTICAST_RID, MULTICAST_LAG_ID, DEV_PORT):
        self.ports[MULTICAST_NODE_ID] = list(DEV_PORT)

    def mod(self, MULTICAST_NODE_ID, DEV_PORT):
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("bf_rt: node update failed\n(busy)")
        self.mods.append((MULTICAST_NODE_ID, list(DEV_PORT)))
        self.ports[MULTICAST_NODE_ID] = list(DEV_PORT)
        if self.on_mod:
            self.on_mod()


class Anything:
    """Every other bfrt call the script makes (table entries, groups): accepted."""

    def __getattr__(self, name):
        return Anything()

    def __call__(self, *args, **kwargs):
        return None


def switch_script(heard, nodes):
    """Runs rackA's script over the stand-ins; returns its names (ATP_MEMBERS, the learner)."""
    script = subprocess.run([atp.launch.atp_binary(), "p4", "config", "--config", str(EXAMPLE),
                             "--switch", "rackA", "--target", "tofino"],
                            check=True, capture_output=True, text=True).stdout
    bfrt = Anything()
    bfrt.atp, bfrt.pre = Anything(), Anything()
    bfrt.atp.pipe = Anything()
    bfrt.atp.pipe.AtpIngress = Anything()
    bfrt.atp.pipe.AtpIngress.heard = heard
    bfrt.pre.node = nodes
    scope = {"bfrt": bfrt}
    exec(script, scope)
    return scope


def a_job_of_two(members):
    group, job = next((g, j) for g, j in members.items() if len(j["members"]) >= 2)
    return int(group), job["members"]


def test_a_member_joins_its_group_only_once_heard(tmp_path):
    heard, nodes = Heard(), Nodes()
    scope = switch_script(heard, nodes)
    group, ((slot0, port0), (slot1, port1)) = a_job_of_two(scope["ATP_MEMBERS"])
    assert nodes.ports[group] == []  # the group starts empty
    assert slot0 in heard.cleared and slot1 in heard.cleared  # a slot's past job forgotten
    learn = scope["learn_members_forever"]
    learn(period_s=0, heartbeat=str(tmp_path / "beat"), rounds=2)
    assert nodes.mods == [] and nodes.ports[group] == []
    heard.values[slot0] = 1  # the data plane accepted the job's packet from member 0's port
    learn(period_s=0, heartbeat=str(tmp_path / "beat"), rounds=3)
    assert nodes.mods == [(group, [port0])]  # once, and member 1 stays out
    total = sum(len(j["members"]) for j in scope["ATP_MEMBERS"].values())
    assert (tmp_path / "beat").read_text().split()[1:] == \
        ["heard", "1", "of", str(total), "ok", "failures", "0"]


def test_a_silent_member_is_read_less_and_less_often(tmp_path):
    heard, nodes = Heard(), Nodes()
    scope = switch_script(heard, nodes)
    group, ((slot0, _), (slot1, _)) = a_job_of_two(scope["ATP_MEMBERS"])
    rounds = 200
    scope["learn_members_forever"](period_s=0.002, heartbeat=str(tmp_path / "beat"),
                                   rounds=rounds)
    # Every 2, 4, 8 ... ms: about log2(the run's length / 2 ms) reads, not one a round.
    assert 3 <= heard.reads[slot1] <= 14, heard.reads[slot1]


def test_a_refused_group_update_is_said_and_tried_again(tmp_path, capsys):
    heard, nodes = Heard(), Nodes(refusals=1)
    scope = switch_script(heard, nodes)
    group, ((slot0, port0), _) = a_job_of_two(scope["ATP_MEMBERS"])
    heard.values[slot0] = 1
    beat = tmp_path / "beat"
    scope["learn_members_forever"](period_s=0, heartbeat=str(beat), rounds=1)
    assert "FAILED bf_rt: node update failed (busy) failures 1" in beat.read_text()
    scope["learn_members_forever"](period_s=0, heartbeat=str(beat), rounds=1)
    assert nodes.ports[group] == [port0]
    assert "atp member learning: bf_rt: node update failed" in capsys.readouterr().err


def test_the_members_file_is_read_every_round_and_a_new_admission_is_learned_afresh(tmp_path):
    heard, nodes = Heard(), Nodes()
    scope = switch_script(heard, nodes)
    group, ((slot0, port0), _) = a_job_of_two(scope["ATP_MEMBERS"])
    members = tmp_path / "members.json"
    entry = '{"%d": {"admission": %d, "members": [[%d, %d]]}}'
    members.write_text(entry % (group, 3, slot0, port0))
    heard.values[slot0] = 1

    def removed_and_admitted_again():
        # Between two rounds: a new, empty group, the slot cleared, and the member heard anew.
        nodes.on_mod = None
        nodes.ports[group] = []
        members.write_text(entry % (group, 4, slot0, port0))

    nodes.on_mod = removed_and_admitted_again
    scope["learn_members_forever"](members_file=str(members), period_s=0,
                                   heartbeat=str(tmp_path / "beat"), rounds=3)
    # A learner that kept the first admission's state would think the port is in the group.
    assert nodes.mods == [(group, [port0]), (group, [port0])]
    assert nodes.ports[group] == [port0]
