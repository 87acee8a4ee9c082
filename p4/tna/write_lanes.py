"""Writes p4/tna/lanes.p4: the TNA program's value headers, lanes and parser states for K values
in three passes (docs/p4.md, "TNA"). `make p4-test` fails when lanes.p4 is not what this writes.

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
K = LATE + 2 * (LATE + EARLY)                # values per packet: three passes
SECOND_END = LATE + LATE + EARLY                     # values before the third pass
# Where each early lane's table stands: the stateful ALUs the control leaves free in stages 4-7.
EARLY_STAGES = [4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 7]
# And each late lane's: beside the missing count and sticky flags in 8, then four in 10 and 11
# (bf-p4c finds no input crossbar room for a lane in stage 9).
LATE_STAGES = [8, 8, 10, 10, 10, 10, 11, 11, 11, 11]
ACTIONS = ["start", "add", "read", "into_packet"]

HEAD = f"""// Written by write_lanes.py (`python3 p4/tna/write_lanes.py`): edit that, not this file.
//
// The value lanes of the TNA program and the passes that carry K = {K} values through them
// (docs/p4.md, "Passes"): the value headers in the order the packet carries them, the lanes, one
// table each, and the parser's value states for each pass.
//
// A pass is one trip through the pipe. The first decides (owner, bitmap, seen) and has stages
// 8, 10 and 11 left for lanes (stage 9's crossbar has no room): the {LATE} late lanes. A packet
// with more than {LATE} values whose phase writes or reads lanes goes round again through the
// recirculation port, its decision in the pass header; a later pass runs no control stage, so
// the stateful ALUs of stages 4-7 the control leaves free are lanes too: {EARLY} early lanes,
// {LATE + EARLY} values per later pass (constants.p4). Values 0-{LATE - 1} take the late lanes in
// pass 0, values {LATE}-{SECOND_END - 1} the late and early lanes in pass 1, values
// {SECOND_END}-{K - 1} the late and early lanes in pass 2. A lane keeps a row of ATP_POOL
// registers per pass it serves.
//
// The lanes always read the same fields (late[i], early[i]): the parser puts each pass's values
// there and the values before them into done_* headers, which no stage touches (they travel in
// tagalong containers).
#ifndef ATP_TNA_LANES_P4
#define ATP_TNA_LANES_P4

#define ATP_LATE_LANE_COUNT {LATE}
#define ATP_EARLY_LANE_COUNT {EARLY}
#define ATP_PASSES 3
#define ATP_LANES {K}  // K: values per packet
#define ATP_FIRST_PASS_END ATP_FIRST_PASS_VALUES                           // {LATE}
#define ATP_SECOND_PASS_END (ATP_FIRST_PASS_VALUES + ATP_LATER_PASS_VALUES)  // {SECOND_END}

// In the packet's order: what the passes before this one carried, then this pass's lanes.
#define ATP_VALUE_HEADERS                  \\
    atp_value_h[{LATE}] done_first;            \\
    atp_value_h[{LATE}] done_second_late;      \\
    atp_value_h[{EARLY}] done_second_early;     \\
    atp_value_h[{LATE}] late;                  \\
    atp_value_h[{EARLY}] early;
"""


def lane_tables(field, count, index, phase, seen, stages=None):
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
        table = f"{field}_{i}_stage"
        pin = f"@stage({stages[i]}) " if stages else ""
        actions = "; ".join(f"{field}_{i}_do_{a}" for a in ACTIONS)
        out += [f"    {pin}table {table} {{ \\",
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


def parser_states():
    out = [f"""// The parser's value states. Pass 0 (from a port): values 0-{LATE - 1} into late[]. Pass 1 (from the
// recirculation port): values 0-{LATE - 1} into done_first[], then {LATE}-{2 * LATE - 1} into late[] and {2 * LATE}-{SECOND_END - 1} into
// early[]. Pass 2: 0-{SECOND_END - 1} into the done_* headers, {SECOND_END}-{SECOND_END + LATE - 1} into late[], {SECOND_END + LATE}-{K - 1}
// into early[]. A lane state stops at the
// packet's value_count; the rest of the packet stays payload.""", "#define ATP_VALUE_STATES \\"]
    out += lane_states("pass0_late", "late", LATE, 0, "accept")
    out += prefix_states("pass1_done_first", "done_first", LATE, "pass1_late_0")
    out += lane_states("pass1_late", "late", LATE, LATE, "pass1_early_0")
    out += lane_states("pass1_early", "early", EARLY, 2 * LATE, "accept")
    out += prefix_states("pass2_done_first", "done_first", LATE, "pass2_done_late_0")
    out += prefix_states("pass2_done_late", "done_second_late", LATE, "pass2_done_early_0")
    out += prefix_states("pass2_done_early", "done_second_early", EARLY, "pass2_late_0")
    out += lane_states("pass2_late", "late", LATE, SECOND_END, "pass2_early_0")
    out += lane_states("pass2_early", "early", K - SECOND_END - LATE, SECOND_END + LATE, "accept")
    return out


def main():
    lines = [HEAD,
             "// The lanes, one table each (a table drives one stateful ALU). Late lanes: after the decision,",
             "// at meta.lane_index, pinned to stages 8, 10, 11. Early lanes: in a later pass, keyed on the",
             "// pass header alone, at its early_index, pinned to the stages whose stateful ALUs the",
             "// control leaves free: two in stages 4 and 5, three in 6, four in 7 (docs/p4.md)."]
    lines += lane_tables("late", LATE, "meta.lane_index", "meta.phase", "meta.seen", LATE_STAGES)
    lines += lane_tables("early", EARLY, "hdr.pass.early_index", "hdr.pass.phase",
                         "hdr.pass.seen[0:0]", EARLY_STAGES)
    lines += parser_states()
    lines += ["", "#endif"]
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "lanes.p4")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
