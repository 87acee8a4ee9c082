// Written by write_lanes.py (`python3 p4/tna/write_lanes.py`): edit that, not this file.
//
// The value lanes of the TNA program and the passes that carry K = 73 values through them
// (docs/p4.md, "Passes"): the value headers in the order the packet carries them, the lanes, one
// table each, the pass plan, and the parser's value states for each pass.
//
// A pass is one trip through the pipe. The first decides (owner, bitmap, seen) and has stages
// 8, 10 and 11 left for lanes (stage 9's crossbar has no room): the 10 late lanes. A packet
// with more than 10 values whose phase writes or reads lanes goes round again through the
// recirculation port, its decision in the pass header; a later pass runs no control stage, so
// the stateful ALUs of stages 4-7 the control leaves free are lanes too: 11 early lanes,
// 21 values per later pass (constants.p4), up to 4 passes:
// pass 0: values 0-9 in the late lanes
// pass 1: values 10-19 in the late lanes, 20-30 in the early lanes
// pass 2: values 31-40 in the late lanes, 41-51 in the early lanes
// pass 3: values 52-61 in the late lanes, 62-72 in the early lanes
// A lane keeps a row of ATP_POOL registers per pass it serves.
//
// The lanes always read the same fields (late[i], early[i]): the parser puts each pass's values
// there and the values before them into done_* headers, which no stage touches (they travel in
// tagalong containers).
#ifndef ATP_TNA_LANES_P4
#define ATP_TNA_LANES_P4

#define ATP_LATE_LANE_COUNT 10
#define ATP_EARLY_LANE_COUNT 11
#define ATP_PASSES 4
#define ATP_LANES 73  // K: values per packet

#define ATP_VALUE_HEADERS \
    atp_value_h[10] done_pass0; \
    atp_value_h[10] done_pass1_late; \
    atp_value_h[11] done_pass1_early; \
    atp_value_h[10] done_pass2_late; \
    atp_value_h[11] done_pass2_early; \
    atp_value_h[10] late; \
    atp_value_h[11] early;

// The lanes, one table each (a table drives one stateful ALU). Late lanes: after the decision,
// at meta.lane_index, pinned to stages 8, 10, 11. Early lanes: in a later pass, keyed on the
// pass header alone, at its early_index, pinned to the stages whose stateful ALUs the
// control leaves free: two in stages 4 and 5, three in 6, four in 7 (docs/p4.md).
#define ATP_LATE_LANES \
    ATP_LANE_ACTIONS(late, 0) \
    action late_0_do_start() { late_0_start.execute(meta.lane_index); } \
    action late_0_do_add() { hdr.late[0].v = late_0_add.execute(meta.lane_index); } \
    action late_0_do_read() { hdr.late[0].v = late_0_read.execute(meta.lane_index); } \
    action late_0_do_into_packet() { hdr.late[0].v = late_0_into_packet.execute(meta.lane_index); } \
    @stage(8) table late_0_stage { \
        key = { hdr.late[0].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_0_do_start; late_0_do_add; late_0_do_read; late_0_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_0_do_start(); \
            (true, PHASE_JOIN, 0) : late_0_do_add(); \
            (true, PHASE_JOIN, 1) : late_0_do_read(); \
            (true, PHASE_FLUSH, 0) : late_0_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_0_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 1) \
    action late_1_do_start() { late_1_start.execute(meta.lane_index); } \
    action late_1_do_add() { hdr.late[1].v = late_1_add.execute(meta.lane_index); } \
    action late_1_do_read() { hdr.late[1].v = late_1_read.execute(meta.lane_index); } \
    action late_1_do_into_packet() { hdr.late[1].v = late_1_into_packet.execute(meta.lane_index); } \
    @stage(8) table late_1_stage { \
        key = { hdr.late[1].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_1_do_start; late_1_do_add; late_1_do_read; late_1_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_1_do_start(); \
            (true, PHASE_JOIN, 0) : late_1_do_add(); \
            (true, PHASE_JOIN, 1) : late_1_do_read(); \
            (true, PHASE_FLUSH, 0) : late_1_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_1_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 2) \
    action late_2_do_start() { late_2_start.execute(meta.lane_index); } \
    action late_2_do_add() { hdr.late[2].v = late_2_add.execute(meta.lane_index); } \
    action late_2_do_read() { hdr.late[2].v = late_2_read.execute(meta.lane_index); } \
    action late_2_do_into_packet() { hdr.late[2].v = late_2_into_packet.execute(meta.lane_index); } \
    @stage(10) table late_2_stage { \
        key = { hdr.late[2].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_2_do_start; late_2_do_add; late_2_do_read; late_2_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_2_do_start(); \
            (true, PHASE_JOIN, 0) : late_2_do_add(); \
            (true, PHASE_JOIN, 1) : late_2_do_read(); \
            (true, PHASE_FLUSH, 0) : late_2_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_2_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 3) \
    action late_3_do_start() { late_3_start.execute(meta.lane_index); } \
    action late_3_do_add() { hdr.late[3].v = late_3_add.execute(meta.lane_index); } \
    action late_3_do_read() { hdr.late[3].v = late_3_read.execute(meta.lane_index); } \
    action late_3_do_into_packet() { hdr.late[3].v = late_3_into_packet.execute(meta.lane_index); } \
    @stage(10) table late_3_stage { \
        key = { hdr.late[3].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_3_do_start; late_3_do_add; late_3_do_read; late_3_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_3_do_start(); \
            (true, PHASE_JOIN, 0) : late_3_do_add(); \
            (true, PHASE_JOIN, 1) : late_3_do_read(); \
            (true, PHASE_FLUSH, 0) : late_3_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_3_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 4) \
    action late_4_do_start() { late_4_start.execute(meta.lane_index); } \
    action late_4_do_add() { hdr.late[4].v = late_4_add.execute(meta.lane_index); } \
    action late_4_do_read() { hdr.late[4].v = late_4_read.execute(meta.lane_index); } \
    action late_4_do_into_packet() { hdr.late[4].v = late_4_into_packet.execute(meta.lane_index); } \
    @stage(10) table late_4_stage { \
        key = { hdr.late[4].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_4_do_start; late_4_do_add; late_4_do_read; late_4_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_4_do_start(); \
            (true, PHASE_JOIN, 0) : late_4_do_add(); \
            (true, PHASE_JOIN, 1) : late_4_do_read(); \
            (true, PHASE_FLUSH, 0) : late_4_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_4_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 5) \
    action late_5_do_start() { late_5_start.execute(meta.lane_index); } \
    action late_5_do_add() { hdr.late[5].v = late_5_add.execute(meta.lane_index); } \
    action late_5_do_read() { hdr.late[5].v = late_5_read.execute(meta.lane_index); } \
    action late_5_do_into_packet() { hdr.late[5].v = late_5_into_packet.execute(meta.lane_index); } \
    @stage(10) table late_5_stage { \
        key = { hdr.late[5].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_5_do_start; late_5_do_add; late_5_do_read; late_5_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_5_do_start(); \
            (true, PHASE_JOIN, 0) : late_5_do_add(); \
            (true, PHASE_JOIN, 1) : late_5_do_read(); \
            (true, PHASE_FLUSH, 0) : late_5_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_5_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 6) \
    action late_6_do_start() { late_6_start.execute(meta.lane_index); } \
    action late_6_do_add() { hdr.late[6].v = late_6_add.execute(meta.lane_index); } \
    action late_6_do_read() { hdr.late[6].v = late_6_read.execute(meta.lane_index); } \
    action late_6_do_into_packet() { hdr.late[6].v = late_6_into_packet.execute(meta.lane_index); } \
    @stage(11) table late_6_stage { \
        key = { hdr.late[6].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_6_do_start; late_6_do_add; late_6_do_read; late_6_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_6_do_start(); \
            (true, PHASE_JOIN, 0) : late_6_do_add(); \
            (true, PHASE_JOIN, 1) : late_6_do_read(); \
            (true, PHASE_FLUSH, 0) : late_6_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_6_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 7) \
    action late_7_do_start() { late_7_start.execute(meta.lane_index); } \
    action late_7_do_add() { hdr.late[7].v = late_7_add.execute(meta.lane_index); } \
    action late_7_do_read() { hdr.late[7].v = late_7_read.execute(meta.lane_index); } \
    action late_7_do_into_packet() { hdr.late[7].v = late_7_into_packet.execute(meta.lane_index); } \
    @stage(11) table late_7_stage { \
        key = { hdr.late[7].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_7_do_start; late_7_do_add; late_7_do_read; late_7_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_7_do_start(); \
            (true, PHASE_JOIN, 0) : late_7_do_add(); \
            (true, PHASE_JOIN, 1) : late_7_do_read(); \
            (true, PHASE_FLUSH, 0) : late_7_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_7_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 8) \
    action late_8_do_start() { late_8_start.execute(meta.lane_index); } \
    action late_8_do_add() { hdr.late[8].v = late_8_add.execute(meta.lane_index); } \
    action late_8_do_read() { hdr.late[8].v = late_8_read.execute(meta.lane_index); } \
    action late_8_do_into_packet() { hdr.late[8].v = late_8_into_packet.execute(meta.lane_index); } \
    @stage(11) table late_8_stage { \
        key = { hdr.late[8].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_8_do_start; late_8_do_add; late_8_do_read; late_8_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_8_do_start(); \
            (true, PHASE_JOIN, 0) : late_8_do_add(); \
            (true, PHASE_JOIN, 1) : late_8_do_read(); \
            (true, PHASE_FLUSH, 0) : late_8_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_8_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(late, 9) \
    action late_9_do_start() { late_9_start.execute(meta.lane_index); } \
    action late_9_do_add() { hdr.late[9].v = late_9_add.execute(meta.lane_index); } \
    action late_9_do_read() { hdr.late[9].v = late_9_read.execute(meta.lane_index); } \
    action late_9_do_into_packet() { hdr.late[9].v = late_9_into_packet.execute(meta.lane_index); } \
    @stage(11) table late_9_stage { \
        key = { hdr.late[9].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { late_9_do_start; late_9_do_add; late_9_do_read; late_9_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : late_9_do_start(); \
            (true, PHASE_JOIN, 0) : late_9_do_add(); \
            (true, PHASE_JOIN, 1) : late_9_do_read(); \
            (true, PHASE_FLUSH, 0) : late_9_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : late_9_do_read(); \
        } \
        size = 8; \
    } \

#define ATP_LATE_LANES_APPLY \
    late_0_stage.apply(); \
    late_1_stage.apply(); \
    late_2_stage.apply(); \
    late_3_stage.apply(); \
    late_4_stage.apply(); \
    late_5_stage.apply(); \
    late_6_stage.apply(); \
    late_7_stage.apply(); \
    late_8_stage.apply(); \
    late_9_stage.apply(); \

#define ATP_EARLY_LANES \
    ATP_LANE_ACTIONS(early, 0) \
    action early_0_do_start() { early_0_start.execute(hdr.pass.early_index); } \
    action early_0_do_add() { hdr.early[0].v = early_0_add.execute(hdr.pass.early_index); } \
    action early_0_do_read() { hdr.early[0].v = early_0_read.execute(hdr.pass.early_index); } \
    action early_0_do_into_packet() { hdr.early[0].v = early_0_into_packet.execute(hdr.pass.early_index); } \
    @stage(4) table early_0_stage { \
        key = { hdr.early[0].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_0_do_start; early_0_do_add; early_0_do_read; early_0_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_0_do_start(); \
            (true, PHASE_JOIN, 0) : early_0_do_add(); \
            (true, PHASE_JOIN, 1) : early_0_do_read(); \
            (true, PHASE_FLUSH, 0) : early_0_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_0_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 1) \
    action early_1_do_start() { early_1_start.execute(hdr.pass.early_index); } \
    action early_1_do_add() { hdr.early[1].v = early_1_add.execute(hdr.pass.early_index); } \
    action early_1_do_read() { hdr.early[1].v = early_1_read.execute(hdr.pass.early_index); } \
    action early_1_do_into_packet() { hdr.early[1].v = early_1_into_packet.execute(hdr.pass.early_index); } \
    @stage(4) table early_1_stage { \
        key = { hdr.early[1].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_1_do_start; early_1_do_add; early_1_do_read; early_1_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_1_do_start(); \
            (true, PHASE_JOIN, 0) : early_1_do_add(); \
            (true, PHASE_JOIN, 1) : early_1_do_read(); \
            (true, PHASE_FLUSH, 0) : early_1_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_1_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 2) \
    action early_2_do_start() { early_2_start.execute(hdr.pass.early_index); } \
    action early_2_do_add() { hdr.early[2].v = early_2_add.execute(hdr.pass.early_index); } \
    action early_2_do_read() { hdr.early[2].v = early_2_read.execute(hdr.pass.early_index); } \
    action early_2_do_into_packet() { hdr.early[2].v = early_2_into_packet.execute(hdr.pass.early_index); } \
    @stage(5) table early_2_stage { \
        key = { hdr.early[2].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_2_do_start; early_2_do_add; early_2_do_read; early_2_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_2_do_start(); \
            (true, PHASE_JOIN, 0) : early_2_do_add(); \
            (true, PHASE_JOIN, 1) : early_2_do_read(); \
            (true, PHASE_FLUSH, 0) : early_2_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_2_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 3) \
    action early_3_do_start() { early_3_start.execute(hdr.pass.early_index); } \
    action early_3_do_add() { hdr.early[3].v = early_3_add.execute(hdr.pass.early_index); } \
    action early_3_do_read() { hdr.early[3].v = early_3_read.execute(hdr.pass.early_index); } \
    action early_3_do_into_packet() { hdr.early[3].v = early_3_into_packet.execute(hdr.pass.early_index); } \
    @stage(5) table early_3_stage { \
        key = { hdr.early[3].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_3_do_start; early_3_do_add; early_3_do_read; early_3_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_3_do_start(); \
            (true, PHASE_JOIN, 0) : early_3_do_add(); \
            (true, PHASE_JOIN, 1) : early_3_do_read(); \
            (true, PHASE_FLUSH, 0) : early_3_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_3_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 4) \
    action early_4_do_start() { early_4_start.execute(hdr.pass.early_index); } \
    action early_4_do_add() { hdr.early[4].v = early_4_add.execute(hdr.pass.early_index); } \
    action early_4_do_read() { hdr.early[4].v = early_4_read.execute(hdr.pass.early_index); } \
    action early_4_do_into_packet() { hdr.early[4].v = early_4_into_packet.execute(hdr.pass.early_index); } \
    @stage(6) table early_4_stage { \
        key = { hdr.early[4].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_4_do_start; early_4_do_add; early_4_do_read; early_4_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_4_do_start(); \
            (true, PHASE_JOIN, 0) : early_4_do_add(); \
            (true, PHASE_JOIN, 1) : early_4_do_read(); \
            (true, PHASE_FLUSH, 0) : early_4_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_4_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 5) \
    action early_5_do_start() { early_5_start.execute(hdr.pass.early_index); } \
    action early_5_do_add() { hdr.early[5].v = early_5_add.execute(hdr.pass.early_index); } \
    action early_5_do_read() { hdr.early[5].v = early_5_read.execute(hdr.pass.early_index); } \
    action early_5_do_into_packet() { hdr.early[5].v = early_5_into_packet.execute(hdr.pass.early_index); } \
    @stage(6) table early_5_stage { \
        key = { hdr.early[5].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_5_do_start; early_5_do_add; early_5_do_read; early_5_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_5_do_start(); \
            (true, PHASE_JOIN, 0) : early_5_do_add(); \
            (true, PHASE_JOIN, 1) : early_5_do_read(); \
            (true, PHASE_FLUSH, 0) : early_5_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_5_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 6) \
    action early_6_do_start() { early_6_start.execute(hdr.pass.early_index); } \
    action early_6_do_add() { hdr.early[6].v = early_6_add.execute(hdr.pass.early_index); } \
    action early_6_do_read() { hdr.early[6].v = early_6_read.execute(hdr.pass.early_index); } \
    action early_6_do_into_packet() { hdr.early[6].v = early_6_into_packet.execute(hdr.pass.early_index); } \
    @stage(6) table early_6_stage { \
        key = { hdr.early[6].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_6_do_start; early_6_do_add; early_6_do_read; early_6_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_6_do_start(); \
            (true, PHASE_JOIN, 0) : early_6_do_add(); \
            (true, PHASE_JOIN, 1) : early_6_do_read(); \
            (true, PHASE_FLUSH, 0) : early_6_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_6_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 7) \
    action early_7_do_start() { early_7_start.execute(hdr.pass.early_index); } \
    action early_7_do_add() { hdr.early[7].v = early_7_add.execute(hdr.pass.early_index); } \
    action early_7_do_read() { hdr.early[7].v = early_7_read.execute(hdr.pass.early_index); } \
    action early_7_do_into_packet() { hdr.early[7].v = early_7_into_packet.execute(hdr.pass.early_index); } \
    @stage(7) table early_7_stage { \
        key = { hdr.early[7].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_7_do_start; early_7_do_add; early_7_do_read; early_7_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_7_do_start(); \
            (true, PHASE_JOIN, 0) : early_7_do_add(); \
            (true, PHASE_JOIN, 1) : early_7_do_read(); \
            (true, PHASE_FLUSH, 0) : early_7_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_7_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 8) \
    action early_8_do_start() { early_8_start.execute(hdr.pass.early_index); } \
    action early_8_do_add() { hdr.early[8].v = early_8_add.execute(hdr.pass.early_index); } \
    action early_8_do_read() { hdr.early[8].v = early_8_read.execute(hdr.pass.early_index); } \
    action early_8_do_into_packet() { hdr.early[8].v = early_8_into_packet.execute(hdr.pass.early_index); } \
    @stage(7) table early_8_stage { \
        key = { hdr.early[8].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_8_do_start; early_8_do_add; early_8_do_read; early_8_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_8_do_start(); \
            (true, PHASE_JOIN, 0) : early_8_do_add(); \
            (true, PHASE_JOIN, 1) : early_8_do_read(); \
            (true, PHASE_FLUSH, 0) : early_8_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_8_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 9) \
    action early_9_do_start() { early_9_start.execute(hdr.pass.early_index); } \
    action early_9_do_add() { hdr.early[9].v = early_9_add.execute(hdr.pass.early_index); } \
    action early_9_do_read() { hdr.early[9].v = early_9_read.execute(hdr.pass.early_index); } \
    action early_9_do_into_packet() { hdr.early[9].v = early_9_into_packet.execute(hdr.pass.early_index); } \
    @stage(7) table early_9_stage { \
        key = { hdr.early[9].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_9_do_start; early_9_do_add; early_9_do_read; early_9_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_9_do_start(); \
            (true, PHASE_JOIN, 0) : early_9_do_add(); \
            (true, PHASE_JOIN, 1) : early_9_do_read(); \
            (true, PHASE_FLUSH, 0) : early_9_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_9_do_read(); \
        } \
        size = 8; \
    } \
    ATP_LANE_ACTIONS(early, 10) \
    action early_10_do_start() { early_10_start.execute(hdr.pass.early_index); } \
    action early_10_do_add() { hdr.early[10].v = early_10_add.execute(hdr.pass.early_index); } \
    action early_10_do_read() { hdr.early[10].v = early_10_read.execute(hdr.pass.early_index); } \
    action early_10_do_into_packet() { hdr.early[10].v = early_10_into_packet.execute(hdr.pass.early_index); } \
    @stage(7) table early_10_stage { \
        key = { hdr.early[10].isValid() : exact; hdr.pass.phase : exact; hdr.pass.seen[0:0] : exact; } \
        actions = { early_10_do_start; early_10_do_add; early_10_do_read; early_10_do_into_packet; NoAction; } \
        const default_action = NoAction(); \
        const entries = { \
            (true, PHASE_START, 0) : early_10_do_start(); \
            (true, PHASE_JOIN, 0) : early_10_do_add(); \
            (true, PHASE_JOIN, 1) : early_10_do_read(); \
            (true, PHASE_FLUSH, 0) : early_10_do_into_packet(); \
            (true, PHASE_FLUSH, 1) : early_10_do_read(); \
        } \
        size = 8; \
    } \

#define ATP_EARLY_LANES_APPLY \
    early_0_stage.apply(); \
    early_1_stage.apply(); \
    early_2_stage.apply(); \
    early_3_stage.apply(); \
    early_4_stage.apply(); \
    early_5_stage.apply(); \
    early_6_stage.apply(); \
    early_7_stage.apply(); \
    early_8_stage.apply(); \
    early_9_stage.apply(); \
    early_10_stage.apply(); \

// The first pass counts the values beyond each pass but the last; pass_step (atp.p4) keys on
// those counts in the first pass and on the pass header's pass and last_pass in the later ones.
#define ATP_PLAN_PASSES \
    meta.beyond_first = hdr.atp.value_count |-| 10; \
    meta.beyond_second = hdr.atp.value_count |-| 31; \
    meta.beyond_third = hdr.atp.value_count |-| 52; \

#define ATP_PASS_STEP_KEYS \
    meta.beyond_first : ternary; \
    meta.beyond_second : ternary; \
    meta.beyond_third : ternary; \

#define ATP_PASS_STEP_ENTRIES \
    (0, _, _, PHASE_NONE, _, _, _) : last_pass(); \
    (0, _, _, _, 0, _, _) : last_pass(); \
    (0, _, _, _, _, 0, _) : first_go_round(1); \
    (0, _, _, _, _, _, 0) : first_go_round(2); \
    (0, _, _, _, _, _, _) : first_go_round(3); \
    (1, 1, 2, _, _, _, _) : next_go_round(); \
    (1, 1, 3, _, _, _, _) : next_go_round(); \
    (1, 2, 3, _, _, _, _) : next_go_round(); \

// The parser's value states. Pass 0 (from a port): the first values into late[]. A later pass
// (from the recirculation port; ATP_LATER_PASS_SELECT picks its states by the pass header): the
// values of the passes before into the done_* headers, then its own into late[] and early[].
// A lane state stops at the packet's value_count; the rest of the packet stays payload.
#define ATP_LATER_PASS_SELECT \
    1 : pass1_done_pass0_0; \
    2 : pass2_done_pass0_0; \
    3 : pass3_done_pass0_0; \

#define ATP_VALUE_STATES \
    state pass0_late_0 { pkt.extract(hdr.late[0]); transition select(hdr.atp.value_count) { 1 : accept; default : pass0_late_1; } } \
    state pass0_late_1 { pkt.extract(hdr.late[1]); transition select(hdr.atp.value_count) { 2 : accept; default : pass0_late_2; } } \
    state pass0_late_2 { pkt.extract(hdr.late[2]); transition select(hdr.atp.value_count) { 3 : accept; default : pass0_late_3; } } \
    state pass0_late_3 { pkt.extract(hdr.late[3]); transition select(hdr.atp.value_count) { 4 : accept; default : pass0_late_4; } } \
    state pass0_late_4 { pkt.extract(hdr.late[4]); transition select(hdr.atp.value_count) { 5 : accept; default : pass0_late_5; } } \
    state pass0_late_5 { pkt.extract(hdr.late[5]); transition select(hdr.atp.value_count) { 6 : accept; default : pass0_late_6; } } \
    state pass0_late_6 { pkt.extract(hdr.late[6]); transition select(hdr.atp.value_count) { 7 : accept; default : pass0_late_7; } } \
    state pass0_late_7 { pkt.extract(hdr.late[7]); transition select(hdr.atp.value_count) { 8 : accept; default : pass0_late_8; } } \
    state pass0_late_8 { pkt.extract(hdr.late[8]); transition select(hdr.atp.value_count) { 9 : accept; default : pass0_late_9; } } \
    state pass0_late_9 { pkt.extract(hdr.late[9]); transition accept; } \
    state pass1_done_pass0_0 { pkt.extract(hdr.done_pass0[0]); transition pass1_done_pass0_1; } \
    state pass1_done_pass0_1 { pkt.extract(hdr.done_pass0[1]); transition pass1_done_pass0_2; } \
    state pass1_done_pass0_2 { pkt.extract(hdr.done_pass0[2]); transition pass1_done_pass0_3; } \
    state pass1_done_pass0_3 { pkt.extract(hdr.done_pass0[3]); transition pass1_done_pass0_4; } \
    state pass1_done_pass0_4 { pkt.extract(hdr.done_pass0[4]); transition pass1_done_pass0_5; } \
    state pass1_done_pass0_5 { pkt.extract(hdr.done_pass0[5]); transition pass1_done_pass0_6; } \
    state pass1_done_pass0_6 { pkt.extract(hdr.done_pass0[6]); transition pass1_done_pass0_7; } \
    state pass1_done_pass0_7 { pkt.extract(hdr.done_pass0[7]); transition pass1_done_pass0_8; } \
    state pass1_done_pass0_8 { pkt.extract(hdr.done_pass0[8]); transition pass1_done_pass0_9; } \
    state pass1_done_pass0_9 { pkt.extract(hdr.done_pass0[9]); transition pass1_late_0; } \
    state pass1_late_0 { pkt.extract(hdr.late[0]); transition select(hdr.atp.value_count) { 11 : accept; default : pass1_late_1; } } \
    state pass1_late_1 { pkt.extract(hdr.late[1]); transition select(hdr.atp.value_count) { 12 : accept; default : pass1_late_2; } } \
    state pass1_late_2 { pkt.extract(hdr.late[2]); transition select(hdr.atp.value_count) { 13 : accept; default : pass1_late_3; } } \
    state pass1_late_3 { pkt.extract(hdr.late[3]); transition select(hdr.atp.value_count) { 14 : accept; default : pass1_late_4; } } \
    state pass1_late_4 { pkt.extract(hdr.late[4]); transition select(hdr.atp.value_count) { 15 : accept; default : pass1_late_5; } } \
    state pass1_late_5 { pkt.extract(hdr.late[5]); transition select(hdr.atp.value_count) { 16 : accept; default : pass1_late_6; } } \
    state pass1_late_6 { pkt.extract(hdr.late[6]); transition select(hdr.atp.value_count) { 17 : accept; default : pass1_late_7; } } \
    state pass1_late_7 { pkt.extract(hdr.late[7]); transition select(hdr.atp.value_count) { 18 : accept; default : pass1_late_8; } } \
    state pass1_late_8 { pkt.extract(hdr.late[8]); transition select(hdr.atp.value_count) { 19 : accept; default : pass1_late_9; } } \
    state pass1_late_9 { pkt.extract(hdr.late[9]); transition select(hdr.atp.value_count) { 20 : accept; default : pass1_early_0; } } \
    state pass1_early_0 { pkt.extract(hdr.early[0]); transition select(hdr.atp.value_count) { 21 : accept; default : pass1_early_1; } } \
    state pass1_early_1 { pkt.extract(hdr.early[1]); transition select(hdr.atp.value_count) { 22 : accept; default : pass1_early_2; } } \
    state pass1_early_2 { pkt.extract(hdr.early[2]); transition select(hdr.atp.value_count) { 23 : accept; default : pass1_early_3; } } \
    state pass1_early_3 { pkt.extract(hdr.early[3]); transition select(hdr.atp.value_count) { 24 : accept; default : pass1_early_4; } } \
    state pass1_early_4 { pkt.extract(hdr.early[4]); transition select(hdr.atp.value_count) { 25 : accept; default : pass1_early_5; } } \
    state pass1_early_5 { pkt.extract(hdr.early[5]); transition select(hdr.atp.value_count) { 26 : accept; default : pass1_early_6; } } \
    state pass1_early_6 { pkt.extract(hdr.early[6]); transition select(hdr.atp.value_count) { 27 : accept; default : pass1_early_7; } } \
    state pass1_early_7 { pkt.extract(hdr.early[7]); transition select(hdr.atp.value_count) { 28 : accept; default : pass1_early_8; } } \
    state pass1_early_8 { pkt.extract(hdr.early[8]); transition select(hdr.atp.value_count) { 29 : accept; default : pass1_early_9; } } \
    state pass1_early_9 { pkt.extract(hdr.early[9]); transition select(hdr.atp.value_count) { 30 : accept; default : pass1_early_10; } } \
    state pass1_early_10 { pkt.extract(hdr.early[10]); transition accept; } \
    state pass2_done_pass0_0 { pkt.extract(hdr.done_pass0[0]); transition pass2_done_pass0_1; } \
    state pass2_done_pass0_1 { pkt.extract(hdr.done_pass0[1]); transition pass2_done_pass0_2; } \
    state pass2_done_pass0_2 { pkt.extract(hdr.done_pass0[2]); transition pass2_done_pass0_3; } \
    state pass2_done_pass0_3 { pkt.extract(hdr.done_pass0[3]); transition pass2_done_pass0_4; } \
    state pass2_done_pass0_4 { pkt.extract(hdr.done_pass0[4]); transition pass2_done_pass0_5; } \
    state pass2_done_pass0_5 { pkt.extract(hdr.done_pass0[5]); transition pass2_done_pass0_6; } \
    state pass2_done_pass0_6 { pkt.extract(hdr.done_pass0[6]); transition pass2_done_pass0_7; } \
    state pass2_done_pass0_7 { pkt.extract(hdr.done_pass0[7]); transition pass2_done_pass0_8; } \
    state pass2_done_pass0_8 { pkt.extract(hdr.done_pass0[8]); transition pass2_done_pass0_9; } \
    state pass2_done_pass0_9 { pkt.extract(hdr.done_pass0[9]); transition pass2_done_pass1_late_0; } \
    state pass2_done_pass1_late_0 { pkt.extract(hdr.done_pass1_late[0]); transition pass2_done_pass1_late_1; } \
    state pass2_done_pass1_late_1 { pkt.extract(hdr.done_pass1_late[1]); transition pass2_done_pass1_late_2; } \
    state pass2_done_pass1_late_2 { pkt.extract(hdr.done_pass1_late[2]); transition pass2_done_pass1_late_3; } \
    state pass2_done_pass1_late_3 { pkt.extract(hdr.done_pass1_late[3]); transition pass2_done_pass1_late_4; } \
    state pass2_done_pass1_late_4 { pkt.extract(hdr.done_pass1_late[4]); transition pass2_done_pass1_late_5; } \
    state pass2_done_pass1_late_5 { pkt.extract(hdr.done_pass1_late[5]); transition pass2_done_pass1_late_6; } \
    state pass2_done_pass1_late_6 { pkt.extract(hdr.done_pass1_late[6]); transition pass2_done_pass1_late_7; } \
    state pass2_done_pass1_late_7 { pkt.extract(hdr.done_pass1_late[7]); transition pass2_done_pass1_late_8; } \
    state pass2_done_pass1_late_8 { pkt.extract(hdr.done_pass1_late[8]); transition pass2_done_pass1_late_9; } \
    state pass2_done_pass1_late_9 { pkt.extract(hdr.done_pass1_late[9]); transition pass2_done_pass1_early_0; } \
    state pass2_done_pass1_early_0 { pkt.extract(hdr.done_pass1_early[0]); transition pass2_done_pass1_early_1; } \
    state pass2_done_pass1_early_1 { pkt.extract(hdr.done_pass1_early[1]); transition pass2_done_pass1_early_2; } \
    state pass2_done_pass1_early_2 { pkt.extract(hdr.done_pass1_early[2]); transition pass2_done_pass1_early_3; } \
    state pass2_done_pass1_early_3 { pkt.extract(hdr.done_pass1_early[3]); transition pass2_done_pass1_early_4; } \
    state pass2_done_pass1_early_4 { pkt.extract(hdr.done_pass1_early[4]); transition pass2_done_pass1_early_5; } \
    state pass2_done_pass1_early_5 { pkt.extract(hdr.done_pass1_early[5]); transition pass2_done_pass1_early_6; } \
    state pass2_done_pass1_early_6 { pkt.extract(hdr.done_pass1_early[6]); transition pass2_done_pass1_early_7; } \
    state pass2_done_pass1_early_7 { pkt.extract(hdr.done_pass1_early[7]); transition pass2_done_pass1_early_8; } \
    state pass2_done_pass1_early_8 { pkt.extract(hdr.done_pass1_early[8]); transition pass2_done_pass1_early_9; } \
    state pass2_done_pass1_early_9 { pkt.extract(hdr.done_pass1_early[9]); transition pass2_done_pass1_early_10; } \
    state pass2_done_pass1_early_10 { pkt.extract(hdr.done_pass1_early[10]); transition pass2_late_0; } \
    state pass2_late_0 { pkt.extract(hdr.late[0]); transition select(hdr.atp.value_count) { 32 : accept; default : pass2_late_1; } } \
    state pass2_late_1 { pkt.extract(hdr.late[1]); transition select(hdr.atp.value_count) { 33 : accept; default : pass2_late_2; } } \
    state pass2_late_2 { pkt.extract(hdr.late[2]); transition select(hdr.atp.value_count) { 34 : accept; default : pass2_late_3; } } \
    state pass2_late_3 { pkt.extract(hdr.late[3]); transition select(hdr.atp.value_count) { 35 : accept; default : pass2_late_4; } } \
    state pass2_late_4 { pkt.extract(hdr.late[4]); transition select(hdr.atp.value_count) { 36 : accept; default : pass2_late_5; } } \
    state pass2_late_5 { pkt.extract(hdr.late[5]); transition select(hdr.atp.value_count) { 37 : accept; default : pass2_late_6; } } \
    state pass2_late_6 { pkt.extract(hdr.late[6]); transition select(hdr.atp.value_count) { 38 : accept; default : pass2_late_7; } } \
    state pass2_late_7 { pkt.extract(hdr.late[7]); transition select(hdr.atp.value_count) { 39 : accept; default : pass2_late_8; } } \
    state pass2_late_8 { pkt.extract(hdr.late[8]); transition select(hdr.atp.value_count) { 40 : accept; default : pass2_late_9; } } \
    state pass2_late_9 { pkt.extract(hdr.late[9]); transition select(hdr.atp.value_count) { 41 : accept; default : pass2_early_0; } } \
    state pass2_early_0 { pkt.extract(hdr.early[0]); transition select(hdr.atp.value_count) { 42 : accept; default : pass2_early_1; } } \
    state pass2_early_1 { pkt.extract(hdr.early[1]); transition select(hdr.atp.value_count) { 43 : accept; default : pass2_early_2; } } \
    state pass2_early_2 { pkt.extract(hdr.early[2]); transition select(hdr.atp.value_count) { 44 : accept; default : pass2_early_3; } } \
    state pass2_early_3 { pkt.extract(hdr.early[3]); transition select(hdr.atp.value_count) { 45 : accept; default : pass2_early_4; } } \
    state pass2_early_4 { pkt.extract(hdr.early[4]); transition select(hdr.atp.value_count) { 46 : accept; default : pass2_early_5; } } \
    state pass2_early_5 { pkt.extract(hdr.early[5]); transition select(hdr.atp.value_count) { 47 : accept; default : pass2_early_6; } } \
    state pass2_early_6 { pkt.extract(hdr.early[6]); transition select(hdr.atp.value_count) { 48 : accept; default : pass2_early_7; } } \
    state pass2_early_7 { pkt.extract(hdr.early[7]); transition select(hdr.atp.value_count) { 49 : accept; default : pass2_early_8; } } \
    state pass2_early_8 { pkt.extract(hdr.early[8]); transition select(hdr.atp.value_count) { 50 : accept; default : pass2_early_9; } } \
    state pass2_early_9 { pkt.extract(hdr.early[9]); transition select(hdr.atp.value_count) { 51 : accept; default : pass2_early_10; } } \
    state pass2_early_10 { pkt.extract(hdr.early[10]); transition accept; } \
    state pass3_done_pass0_0 { pkt.extract(hdr.done_pass0[0]); transition pass3_done_pass0_1; } \
    state pass3_done_pass0_1 { pkt.extract(hdr.done_pass0[1]); transition pass3_done_pass0_2; } \
    state pass3_done_pass0_2 { pkt.extract(hdr.done_pass0[2]); transition pass3_done_pass0_3; } \
    state pass3_done_pass0_3 { pkt.extract(hdr.done_pass0[3]); transition pass3_done_pass0_4; } \
    state pass3_done_pass0_4 { pkt.extract(hdr.done_pass0[4]); transition pass3_done_pass0_5; } \
    state pass3_done_pass0_5 { pkt.extract(hdr.done_pass0[5]); transition pass3_done_pass0_6; } \
    state pass3_done_pass0_6 { pkt.extract(hdr.done_pass0[6]); transition pass3_done_pass0_7; } \
    state pass3_done_pass0_7 { pkt.extract(hdr.done_pass0[7]); transition pass3_done_pass0_8; } \
    state pass3_done_pass0_8 { pkt.extract(hdr.done_pass0[8]); transition pass3_done_pass0_9; } \
    state pass3_done_pass0_9 { pkt.extract(hdr.done_pass0[9]); transition pass3_done_pass1_late_0; } \
    state pass3_done_pass1_late_0 { pkt.extract(hdr.done_pass1_late[0]); transition pass3_done_pass1_late_1; } \
    state pass3_done_pass1_late_1 { pkt.extract(hdr.done_pass1_late[1]); transition pass3_done_pass1_late_2; } \
    state pass3_done_pass1_late_2 { pkt.extract(hdr.done_pass1_late[2]); transition pass3_done_pass1_late_3; } \
    state pass3_done_pass1_late_3 { pkt.extract(hdr.done_pass1_late[3]); transition pass3_done_pass1_late_4; } \
    state pass3_done_pass1_late_4 { pkt.extract(hdr.done_pass1_late[4]); transition pass3_done_pass1_late_5; } \
    state pass3_done_pass1_late_5 { pkt.extract(hdr.done_pass1_late[5]); transition pass3_done_pass1_late_6; } \
    state pass3_done_pass1_late_6 { pkt.extract(hdr.done_pass1_late[6]); transition pass3_done_pass1_late_7; } \
    state pass3_done_pass1_late_7 { pkt.extract(hdr.done_pass1_late[7]); transition pass3_done_pass1_late_8; } \
    state pass3_done_pass1_late_8 { pkt.extract(hdr.done_pass1_late[8]); transition pass3_done_pass1_late_9; } \
    state pass3_done_pass1_late_9 { pkt.extract(hdr.done_pass1_late[9]); transition pass3_done_pass1_early_0; } \
    state pass3_done_pass1_early_0 { pkt.extract(hdr.done_pass1_early[0]); transition pass3_done_pass1_early_1; } \
    state pass3_done_pass1_early_1 { pkt.extract(hdr.done_pass1_early[1]); transition pass3_done_pass1_early_2; } \
    state pass3_done_pass1_early_2 { pkt.extract(hdr.done_pass1_early[2]); transition pass3_done_pass1_early_3; } \
    state pass3_done_pass1_early_3 { pkt.extract(hdr.done_pass1_early[3]); transition pass3_done_pass1_early_4; } \
    state pass3_done_pass1_early_4 { pkt.extract(hdr.done_pass1_early[4]); transition pass3_done_pass1_early_5; } \
    state pass3_done_pass1_early_5 { pkt.extract(hdr.done_pass1_early[5]); transition pass3_done_pass1_early_6; } \
    state pass3_done_pass1_early_6 { pkt.extract(hdr.done_pass1_early[6]); transition pass3_done_pass1_early_7; } \
    state pass3_done_pass1_early_7 { pkt.extract(hdr.done_pass1_early[7]); transition pass3_done_pass1_early_8; } \
    state pass3_done_pass1_early_8 { pkt.extract(hdr.done_pass1_early[8]); transition pass3_done_pass1_early_9; } \
    state pass3_done_pass1_early_9 { pkt.extract(hdr.done_pass1_early[9]); transition pass3_done_pass1_early_10; } \
    state pass3_done_pass1_early_10 { pkt.extract(hdr.done_pass1_early[10]); transition pass3_done_pass2_late_0; } \
    state pass3_done_pass2_late_0 { pkt.extract(hdr.done_pass2_late[0]); transition pass3_done_pass2_late_1; } \
    state pass3_done_pass2_late_1 { pkt.extract(hdr.done_pass2_late[1]); transition pass3_done_pass2_late_2; } \
    state pass3_done_pass2_late_2 { pkt.extract(hdr.done_pass2_late[2]); transition pass3_done_pass2_late_3; } \
    state pass3_done_pass2_late_3 { pkt.extract(hdr.done_pass2_late[3]); transition pass3_done_pass2_late_4; } \
    state pass3_done_pass2_late_4 { pkt.extract(hdr.done_pass2_late[4]); transition pass3_done_pass2_late_5; } \
    state pass3_done_pass2_late_5 { pkt.extract(hdr.done_pass2_late[5]); transition pass3_done_pass2_late_6; } \
    state pass3_done_pass2_late_6 { pkt.extract(hdr.done_pass2_late[6]); transition pass3_done_pass2_late_7; } \
    state pass3_done_pass2_late_7 { pkt.extract(hdr.done_pass2_late[7]); transition pass3_done_pass2_late_8; } \
    state pass3_done_pass2_late_8 { pkt.extract(hdr.done_pass2_late[8]); transition pass3_done_pass2_late_9; } \
    state pass3_done_pass2_late_9 { pkt.extract(hdr.done_pass2_late[9]); transition pass3_done_pass2_early_0; } \
    state pass3_done_pass2_early_0 { pkt.extract(hdr.done_pass2_early[0]); transition pass3_done_pass2_early_1; } \
    state pass3_done_pass2_early_1 { pkt.extract(hdr.done_pass2_early[1]); transition pass3_done_pass2_early_2; } \
    state pass3_done_pass2_early_2 { pkt.extract(hdr.done_pass2_early[2]); transition pass3_done_pass2_early_3; } \
    state pass3_done_pass2_early_3 { pkt.extract(hdr.done_pass2_early[3]); transition pass3_done_pass2_early_4; } \
    state pass3_done_pass2_early_4 { pkt.extract(hdr.done_pass2_early[4]); transition pass3_done_pass2_early_5; } \
    state pass3_done_pass2_early_5 { pkt.extract(hdr.done_pass2_early[5]); transition pass3_done_pass2_early_6; } \
    state pass3_done_pass2_early_6 { pkt.extract(hdr.done_pass2_early[6]); transition pass3_done_pass2_early_7; } \
    state pass3_done_pass2_early_7 { pkt.extract(hdr.done_pass2_early[7]); transition pass3_done_pass2_early_8; } \
    state pass3_done_pass2_early_8 { pkt.extract(hdr.done_pass2_early[8]); transition pass3_done_pass2_early_9; } \
    state pass3_done_pass2_early_9 { pkt.extract(hdr.done_pass2_early[9]); transition pass3_done_pass2_early_10; } \
    state pass3_done_pass2_early_10 { pkt.extract(hdr.done_pass2_early[10]); transition pass3_late_0; } \
    state pass3_late_0 { pkt.extract(hdr.late[0]); transition select(hdr.atp.value_count) { 53 : accept; default : pass3_late_1; } } \
    state pass3_late_1 { pkt.extract(hdr.late[1]); transition select(hdr.atp.value_count) { 54 : accept; default : pass3_late_2; } } \
    state pass3_late_2 { pkt.extract(hdr.late[2]); transition select(hdr.atp.value_count) { 55 : accept; default : pass3_late_3; } } \
    state pass3_late_3 { pkt.extract(hdr.late[3]); transition select(hdr.atp.value_count) { 56 : accept; default : pass3_late_4; } } \
    state pass3_late_4 { pkt.extract(hdr.late[4]); transition select(hdr.atp.value_count) { 57 : accept; default : pass3_late_5; } } \
    state pass3_late_5 { pkt.extract(hdr.late[5]); transition select(hdr.atp.value_count) { 58 : accept; default : pass3_late_6; } } \
    state pass3_late_6 { pkt.extract(hdr.late[6]); transition select(hdr.atp.value_count) { 59 : accept; default : pass3_late_7; } } \
    state pass3_late_7 { pkt.extract(hdr.late[7]); transition select(hdr.atp.value_count) { 60 : accept; default : pass3_late_8; } } \
    state pass3_late_8 { pkt.extract(hdr.late[8]); transition select(hdr.atp.value_count) { 61 : accept; default : pass3_late_9; } } \
    state pass3_late_9 { pkt.extract(hdr.late[9]); transition select(hdr.atp.value_count) { 62 : accept; default : pass3_early_0; } } \
    state pass3_early_0 { pkt.extract(hdr.early[0]); transition select(hdr.atp.value_count) { 63 : accept; default : pass3_early_1; } } \
    state pass3_early_1 { pkt.extract(hdr.early[1]); transition select(hdr.atp.value_count) { 64 : accept; default : pass3_early_2; } } \
    state pass3_early_2 { pkt.extract(hdr.early[2]); transition select(hdr.atp.value_count) { 65 : accept; default : pass3_early_3; } } \
    state pass3_early_3 { pkt.extract(hdr.early[3]); transition select(hdr.atp.value_count) { 66 : accept; default : pass3_early_4; } } \
    state pass3_early_4 { pkt.extract(hdr.early[4]); transition select(hdr.atp.value_count) { 67 : accept; default : pass3_early_5; } } \
    state pass3_early_5 { pkt.extract(hdr.early[5]); transition select(hdr.atp.value_count) { 68 : accept; default : pass3_early_6; } } \
    state pass3_early_6 { pkt.extract(hdr.early[6]); transition select(hdr.atp.value_count) { 69 : accept; default : pass3_early_7; } } \
    state pass3_early_7 { pkt.extract(hdr.early[7]); transition select(hdr.atp.value_count) { 70 : accept; default : pass3_early_8; } } \
    state pass3_early_8 { pkt.extract(hdr.early[8]); transition select(hdr.atp.value_count) { 71 : accept; default : pass3_early_9; } } \
    state pass3_early_9 { pkt.extract(hdr.early[9]); transition select(hdr.atp.value_count) { 72 : accept; default : pass3_early_10; } } \
    state pass3_early_10 { pkt.extract(hdr.early[10]); transition accept; } \

#endif
