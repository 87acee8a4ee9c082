#!/usr/bin/python3
"""Checks a bfrt_python script from `atp p4 config --target tofino` against the bfrt.json that
bf-p4c wrote for p4/tna/atp.p4: every table exists, every action is one of the table's, every
key and action field is named as bfrt_python names it (the P4 name with dots as underscores;
`_mask` for ternary keys, `_p_length` for LPM keys, MATCH_PRIORITY where the table has one),
no key is missing, and every value fits its field's width (a parser value set's entries are
`add` calls with its keys alone; a register's `mod` names an index within it and its field f1),
and the member learner and claim clock read and write registers bfrt.json has. There is no
Tofino here to run the script on: this is what can be checked without one.

Usage: check_bfrt_names.py BFRT_JSON SCRIPT...   (exit 1 on the first script with a problem)
"""
import ast
import json
import re
import sys

CALL = re.compile(r"^p4\.(?P<table>[\w.]+)\.(?P<method>add_with_\w+|set_default_with_\w+|add|delete|"
                  r"reset_default|mod)\((?P<args>.*)\)$")
# The packet replication engine's fixed tables (not in bfrt.json): the fields the script sets.
PRE = {"bfrt.pre.node.add": {"MULTICAST_NODE_ID", "MULTICAST_RID", "MULTICAST_LAG_ID", "DEV_PORT"},
       "bfrt.pre.mgid.add": {"MGID", "MULTICAST_NODE_ID", "MULTICAST_NODE_L1_XID_VALID",
                             "MULTICAST_NODE_L1_XID"},
       "bfrt.pre.node.delete": {"MULTICAST_NODE_ID"}, "bfrt.pre.mgid.delete": {"MGID"}}
# What learn_members_forever() calls: a heard slot read, and a group's ports set.
LEARNER_CALLS = ['p4.AtpIngress.heard.get(REGISTER_INDEX=slot, from_hw=True',
                 '.data[b"AtpIngress.heard.f1"]',
                 "bfrt.pre.node.mod(MULTICAST_NODE_ID=job[0], DEV_PORT=ports)"]


def arguments(text):
    call = ast.parse(f"f({text})", mode="eval").body
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def table_fields(table):
    """{bfrt_python key argument: width} of a table's keys, and whether all are required."""
    fields = {}
    for key in table.get("key", []):
        name, width = key["name"], key["type"].get("width", 32)
        if name == "$MATCH_PRIORITY":
            fields["MATCH_PRIORITY"] = 32
            continue
        base = name.replace(".", "_")
        fields[base] = width
        if key["match_type"] == "Ternary":
            fields[base + "_mask"] = width
        elif key["match_type"] == "LPM":
            fields[base + "_p_length"] = 8
    return fields


def check_fits(what, name, value, width):
    if not isinstance(value, int) or value < 0 or value >= 1 << width:
        raise ValueError(f"{what}: {name}={value!r} does not fit {width} bits")


def check_call(line, tables):
    m = CALL.match(line)
    if not m:
        raise ValueError(f"not a table call this checker knows: {line}")
    name = "pipe." + m["table"]
    table = tables.get(name)
    if table is None:
        raise ValueError(f"no table {name} in bfrt.json")
    args = arguments(m["args"])
    keys = table_fields(table)
    method = m["method"]
    if method == "reset_default":
        return
    if method == "mod":
        check_register_write(name, table, args)
        return
    if not method.startswith("set_default"):
        missing = set(keys) - set(args)
        if missing:
            raise ValueError(f"{name}: keys missing: {sorted(missing)}")
    data = {}
    if method == "add" and table.get("table_type") != "ParserValueSet":
        raise ValueError(f"{name}: add without an action is for a parser value set only")
    if "_with_" in method:
        action = method.split("_with_", 1)[1]
        specs = [a for a in table.get("action_specs", []) if a["name"].split(".")[-1] == action]
        if not specs:
            raise ValueError(f"{name}: no action {action}")
        data = {d["name"]: d["type"].get("width", 32) for d in specs[0].get("data", [])}
        missing = set(data) - set(args)
        if missing:
            raise ValueError(f"{name}.{action}: parameters missing: {sorted(missing)}")
    for arg, value in args.items():
        width = keys.get(arg, data.get(arg))
        if width is None:
            raise ValueError(f"{name}: no key or parameter named {arg}")
        check_fits(name, arg, value, width)


CLAIM_CLOCK = "p4.AtpIngress.claim_epoch.mod(REGISTER_INDEX=0, f1=epoch)"


def register_f1(register, name):
    """Register `name` of bfrt.json (its table, or None) and its one data field, which
    bfrt_python names f1 (e.g. AtpIngress.heard.f1); a ValueError unless it is such a register."""
    if register is None or register.get("table_type") != "Register" or \
            [k["name"] for k in register["key"]] != ["$REGISTER_INDEX"] or \
            [d["singleton"]["name"].split(".")[-1] for d in register["data"]] != ["f1"]:
        raise ValueError(f"bfrt.json has no register {name} with field f1")
    return register["data"][0]["singleton"]


def check_register_write(name, register, args):
    field = register_f1(register, name)
    if set(args) != {"REGISTER_INDEX", "f1"}:
        raise ValueError(f"{name}: a register write names REGISTER_INDEX and f1 alone")
    check_fits(name, "REGISTER_INDEX", args["REGISTER_INDEX"], 32)
    if args["REGISTER_INDEX"] >= register["size"]:
        raise ValueError(f"{name}: index {args['REGISTER_INDEX']} beyond its {register['size']}")
    check_fits(name, "f1", args["f1"], field["type"]["width"])


def check_learner(body, tables):
    """learn_members_forever() reads register heard by the names bfrt.json gives it, and its
    ATP_MEMBERS name slots within it."""
    register = tables.get("pipe.AtpIngress.heard")
    register_f1(register, "AtpIngress.heard")
    for call in LEARNER_CALLS:
        if call not in body:
            raise ValueError(f"learn_members_forever() does not call {call}")
    members = ast.literal_eval(body.split("\n", 1)[0])
    for group, job in members.items():
        for slot, port in job["members"]:
            if not 0 < slot < register["size"] or not 0 <= port < 512:
                raise ValueError(f"ATP_MEMBERS: group {group}: slot {slot}, port {port}")


def check_claim_clock(body, tables):
    """The claim clock function writes the epoch register by the names bfrt.json gives it."""
    if CLAIM_CLOCK not in body:
        raise ValueError("claim_clock_forever() does not write the claim epoch")
    register_f1(tables.get("pipe.AtpIngress.claim_epoch"), "AtpIngress.claim_epoch")


def check_script(path, tables):
    text = open(path).read()
    _, _, clock = text.partition("\ndef claim_clock_forever(")
    if clock:
        check_claim_clock(clock, tables)
    _, _, learner = text.partition("\nATP_MEMBERS = ")
    if learner:
        check_learner(learner, tables)
    # The entries: what comes before the first function or the learner's members.
    top = re.split(r"\n(?:def |ATP_MEMBERS = )", text, maxsplit=1)[0]
    lines = [l.strip() for l in top.split("\n") if l.strip() and not l.startswith("#")]
    if not lines or lines[0] != "p4 = bfrt.atp.pipe":
        raise ValueError("the script must start with p4 = bfrt.atp.pipe")
    for line in lines[1:]:
        pre = line.split("(", 1)[0]
        if pre in PRE:
            extra = set(arguments(line.split("(", 1)[1][:-1])) - PRE[pre]
            if extra:
                raise ValueError(f"{pre}: unknown fields {sorted(extra)}")
            continue
        check_call(line, tables)
    return len(lines) - 1


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        tables = {t["name"]: t for t in json.load(f)["tables"]}
    for path in sys.argv[2:]:
        try:
            count = check_script(path, tables)
        except (ValueError, SyntaxError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
        print(f"{path}: {count} calls match bfrt.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
