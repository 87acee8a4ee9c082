"""Writes p4/tna/lanes.p4: the TNA program's value headers, lanes, pass plan and parser states for
K values in ATP_PASSES passes (docs/p4.md, "TNA" and "Passes"). `make p4-test` fails when
lanes.p4 is not what this writes.

Usage: write_lanes.py [OUT] (default: lanes.p4 beside this script)
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def constant(name):
    """A #define of p4/common/constants.p4: the pass sizes live there, for both programs."""
    text = open(os.path.join(HERE, "..", "common", "constants.p4")).read()
    return int(re.search(rf"#define {name} (\d+)", text).group(1))


LATE = constant("ATP_FIRST_PASS_VALUES")             # after the decision, in every pass
EARLY = constant("ATP_LATER_PASS_VALUES") - LATE     # stages 4-7, in the passes after the first
PASSES = 4  # trips through the pipe, at most: 2 to 4 (three beyond_* fields, pass_step size 8)
K = LATE + (PASSES - 1) * (LATE + EARLY)             # values per packet
# END[p]: the values before pass p + 1 (pass 0 is the first).
END = [LATE + p * (LATE + EARLY) for p in range(PASSES)]
# The metadata fields (p4/common/headers.p4) that say how many values lie beyond each pass.
BEYOND = ["beyond_first", "beyond_second", "beyond_third"][:PASSES - 1]
assert 2 <= PASSES and len(BEYOND) == PASSES - 1, "a beyond_* field of atp_meta_t per pass but the last"
# Where each early lane's table stands: the stateful ALUs the control leaves free in stages 4-7.
EARLY_STAGES = [4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 7]
# And each late lane's: beside the missing count and sticky flags in 8, then four in 10 and 11
# (bf-p4c finds no input crossbar room for a lane in stage 9).
LATE_STAGES = [8, 8, 10, 10, 10, 10, 11, 11, 11, 11]
ACTIONS = ["start", "add", "read", "into_packet"]


def pass_ranges():
    """Comment lines: which values each pass's lanes take."""
    out = [f"// pass 0: values 0-{LATE - 1} in the late lanes"]
    for p in range(1, PASSES):
        first = END[p - 1]
        out.append(f"// pass {p}: values {first}-{first + LATE - 1} in the late lanes, "
                   f"{first + LATE}-{min(END[p], K) - 1} in the early lanes")
    return "\n".join(out)


def value_headers():
    """In the packet's order: what the passes before this one carried, then this pass's lanes."""
    done = [f"    atp_value_h[{LATE}] done_pass0; \\"]
    for p in range(1, PASSES - 1):
        done += [f"    atp_value_h[{LATE}] done_pass{p}_late; \\",
                 f"    atp_value_h[{EARLY}] done_pass{p}_early; \\"]
    return ["#define ATP_VALUE_HEADERS \\"] + done + [
        f"    atp_value_h[{LATE}] late; \\", f"    atp_value_h[{EARLY}] early;", ""]


HEAD = f"""// Written by write_lanes.py (`python3 p4/tna/write_lanes.py`): edit that, not this file.
//
// The value lanes of the TNA program and the passes that carry K = {K} values through them
// (docs/p4.md, "Passes"): the value headers in the order the packet carries them, the lanes, one
// table each, the pass plan, and the parser's value states for each pass.
//
// A pass is one trip through the pipe. The first decides (owner, bitmap, seen) and has stages
// 8, 10 and 11 left for lanes (stage 9's crossbar has no room): the {LATE} late lanes. A packet
// with more than {LATE} values whose phase writes or reads lanes goes round again through the
// recirculation port, its decision in the pass header; a later pass runs no control stage, so
// the stateful ALUs of stages 4-7 the control leaves free are lanes too: {EARLY} early lanes,
// {LATE + EARLY} values per later pass (constants.p4), up to {PASSES} passes:
{pass_ranges()}
// A lane keeps a row of ATP_POOL registers per pass it serves.
//
// The lanes always read the same fields (late[i], early[i]): the parser puts each pass's values
// there and the values before them into done_* headers, which no stage touches (they travel in
// tagalong containers).
#ifndef ATP_TNA_LANES_P4
#define ATP_TNA_LANES_P4

#define ATP_LATE_LANE_COUNT {LATE}
#define ATP_EARLY_LANE_COUNT {EARLY}
#define ATP_PASSES {PASSES}
#define ATP_LANES {K}  // K: values per packet
"""


def lane_tables(field, count, index, phase, seen, stages):
    """One table per lane (a table drives one stateful ALU), pinned where `stages` says."""
    out = [f"#define ATP_{field.upper()}_LANES \\"]
    for i in range(count):
        out.append(f"    ATP_LANE_ACTIONS({field}, {i}) \\")
        for action in ACTIONS:
            if action == "start":
                body = f"{field}_{i}_start.execute({index});"
            else:
                body = f"hdr.{field}[{i}].v = {field}_{i}_{action}.execute({index});"
            out.append(f"    action {field}_{i}_do_{action}() {{ {body} }} \\")
        actions = "; ".join(f"{field}_{i}_do_{a}" for a in ACTIONS)
        out += [f"    @stage({stages[i]}) table {field}_{i}_stage {{ \\",
                f"        key = {{ hdr.{field}[{i}].isValid() : exact; {phase} : exact; {seen} : exact; }} \\",
                f"        actions = {{ {actions}; NoAction; }} \\",
                "        const default_action = NoAction(); \\",
                "        const entries = { \\",
                f"            (true, PHASE_START, 0) : {field}_{i}_do_start(); \\",
                f"            (true, PHASE_JOIN, 0) : {field}_{i}_do_add(); \\",
                f"            (true, PHASE_JOIN, 1) : {field}_{i}_do_read(); \\",
                f"            (true, PHASE_FLUSH, 0) : {field}_{i}_do_into_packet(); \\",
                f"            (true, PHASE_FLUSH, 1) : {field}_{i}_do_read(); \\",
                "        } \\",
                "        size = 8; \\",
                "    } \\"]
    out += ["", f"#define ATP_{field.upper()}_LANES_APPLY \\"]
    out += [f"    {field}_{i}_stage.apply(); \\" for i in range(count)]
    return out + [""]


def pass_plan():
    """The first pass's plan: the values beyond each pass, and from them how many passes the
    packet takes (pass_step's keys and entries in atp.p4; the default is to leave)."""
    out = ["// The first pass counts the values beyond each pass but the last; pass_step (atp.p4) keys on",
           "// those counts in the first pass and on the pass header's pass and last_pass in the later ones.",
           "#define ATP_PLAN_PASSES \\"]
    out += [f"    meta.{name} = hdr.atp.value_count |-| {END[p]}; \\" for p, name in enumerate(BEYOND)]
    out += ["", "#define ATP_PASS_STEP_KEYS \\"]
    out += [f"    meta.{name} : ternary; \\" for name in BEYOND]
    anys = ["_"] * len(BEYOND)

    def entry(later, pass_, last, phase, beyond, action):
        return f"    ({later}, {pass_}, {last}, {phase}, {', '.join(beyond)}) : {action}; \\"

    out += ["", "#define ATP_PASS_STEP_ENTRIES \\",
            entry(0, "_", "_", "PHASE_NONE", anys, "last_pass()")]
    for p in range(len(BEYOND)):  # no values beyond pass p: the packet's last pass is p
        beyond = anys[:p] + ["0"] + anys[p + 1:]
        action = "last_pass()" if p == 0 else f"first_go_round({p})"
        out.append(entry(0, "_", "_", "_", beyond, action))
    out.append(entry(0, "_", "_", "_", anys, f"first_go_round({PASSES - 1})"))
    for p in range(1, PASSES - 1):
        for last in range(p + 1, PASSES):
            out.append(entry(1, p, last, "_", anys, "next_go_round()"))
    entries = sum(1 for line in out if line.startswith("    ("))
    assert entries <= 8, f"{entries} pass_step entries: raise its size in atp.p4"
    return out + [""]


def state(name, body, transition):
    return f"    state {name} {{ {body} {transition} }} \\"


def stop_at(count, then):
    return f"transition select(hdr.atp.value_count) {{ {count} : accept; default : {then}; }}"


def prefix_states(prefix, field, count, then):
    """Values an earlier pass took, into done_* headers, each state on to the next."""
    return [state(f"{prefix}_{j}", f"pkt.extract(hdr.{field}[{j}]);",
                  f"transition {prefix}_{j + 1};" if j < count - 1 else f"transition {then};")
            for j in range(count)]


def lane_states(prefix, field, count, first_value, then):
    """This pass's values, into the lanes' fields, each state stopping at the packet's count."""
    out = []
    for j in range(count):
        extract = f"pkt.extract(hdr.{field}[{j}]);"
        last = j == count - 1
        if last and then == "accept":
            out.append(state(f"{prefix}_{j}", extract, "transition accept;"))
        else:
            out.append(state(f"{prefix}_{j}", extract,
                             stop_at(first_value + j + 1, then if last else f"{prefix}_{j + 1}")))
    return out


def later_pass_states(p):
    """Pass p's states: the values of passes 0..p-1 into done_* headers, then p's into the lanes."""
    done = [("done_pass0", LATE)]
    for q in range(1, p):
        done += [(f"done_pass{q}_late", LATE), (f"done_pass{q}_early", EARLY)]
    names = [f"pass{p}_{field}" for field, _ in done] + [f"pass{p}_late", f"pass{p}_early"]
    out = []
    for n, (field, count) in enumerate(done):
        out += prefix_states(names[n], field, count, f"{names[n + 1]}_0")
    first = END[p - 1]
    out += lane_states(f"pass{p}_late", "late", LATE, first, f"pass{p}_early_0")
    out += lane_states(f"pass{p}_early", "early", min(EARLY, K - first - LATE), first + LATE, "accept")
    return out


def parser_states():
    out = ["// The parser's value states. Pass 0 (from a port): the first values into late[]. A later pass",
           "// (from the recirculation port; ATP_LATER_PASS_SELECT picks its states by the pass header): the",
           "// values of the passes before into the done_* headers, then its own into late[] and early[].",
           "// A lane state stops at the packet's value_count; the rest of the packet stays payload.",
           "#define ATP_LATER_PASS_SELECT \\"]
    out += [f"    {p} : pass{p}_done_pass0_0; \\" for p in range(1, PASSES)]
    out += ["", "#define ATP_VALUE_STATES \\"]
    out += lane_states("pass0_late", "late", LATE, 0, "accept")
    for p in range(1, PASSES):
        out += later_pass_states(p)
    return out


def main():
    lines = [HEAD] + value_headers() + [
        "// The lanes, one table each (a table drives one stateful ALU). Late lanes: after the decision,",
        "// at meta.lane_index, pinned to stages 8, 10, 11. Early lanes: in a later pass, keyed on the",
        "// pass header alone, at its early_index, pinned to the stages whose stateful ALUs the",
        "// control leaves free: two in stages 4 and 5, three in 6, four in 7 (docs/p4.md)."]
    lines += lane_tables("late", LATE, "meta.lane_index", "meta.phase", "meta.seen", LATE_STAGES)
    lines += lane_tables("early", EARLY, "hdr.pass.early_index", "hdr.pass.phase",
                         "hdr.pass.seen[0:0]", EARLY_STAGES)
    lines += pass_plan()
    lines += parser_states()
    lines += ["", "#endif"]
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "lanes.p4")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
