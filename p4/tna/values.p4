// The value lanes on Tofino: one Register per lane, each lane one stateful ALU with four
// RegisterActions, all reading the lane's one field (late[i] or early[i], lanes.p4). A late lane
// (stages 8-11) runs in every pass and keeps a row of ATP_POOL registers per pass, at
// meta.lane_index; an early lane (stages 3-7) runs in the passes after the first, at
// the pass header's early_index.
//
// No per-lane overflow detection here (the C++ model and the v1model program flag a wrapped
// int32 sum): on Tofino 1 it costs an ALU chain per lane that the lanes' stages do not have.
// The workers' per-value bound (quant::sum_safe_magnitude, docs/engines.md §3.4) keeps every
// sum of a job's contributions inside int32, so only a worker configured with fewer workers
// than the job has could wrap a sum here unflagged (docs/p4.md, "TNA").
#ifndef ATP_TNA_VALUES_P4
#define ATP_TNA_VALUES_P4

#include "../common/headers.p4"
#include "lanes.p4"

// The phases the bitmap stage names (aggregator.p4), on which every later stage keys.
const bit<8> PHASE_NONE = 0;
const bit<8> PHASE_START = 1;
const bit<8> PHASE_JOIN = 2;
const bit<8> PHASE_FLUSH = 3;

// Lane i of a field: its register (one row of ATP_POOL per pass it serves) and four actions.
// start keeps the packet's value; add writes the sum into register and packet; read copies the
// register into the packet; into_packet (a flush) adds the register into the packet only.
#define ATP_ROWS_late ATP_PASSES
#define ATP_ROWS_early (ATP_PASSES - 1)
#define ATP_LANE_ACTIONS(field, i)                                                          \
    Register<bit<32>, bit<32>>(ATP_POOL * ATP_ROWS_##field) field##_##i;                    \
    RegisterAction<bit<32>, bit<32>, bit<32>>(field##_##i) field##_##i##_start = {          \
        void apply(inout bit<32> r) { r = hdr.field[i].v; }                                 \
    };                                                                                      \
    RegisterAction<bit<32>, bit<32>, bit<32>>(field##_##i) field##_##i##_add = {            \
        void apply(inout bit<32> r, out bit<32> sum) { r = r + hdr.field[i].v; sum = r; }   \
    };                                                                                      \
    RegisterAction<bit<32>, bit<32>, bit<32>>(field##_##i) field##_##i##_read = {           \
        void apply(inout bit<32> r, out bit<32> value) { value = r; }                       \
    };                                                                                      \
    RegisterAction<bit<32>, bit<32>, bit<32>>(field##_##i) field##_##i##_into_packet = {    \
        void apply(inout bit<32> r, out bit<32> sum) { sum = r + hdr.field[i].v; }          \
    };

// Each lane's table picks its action from the phase and whether the aggregator had the
// packet's contribution already; lanes the packet does not carry are left alone (lanes.p4).
control LateLanes(inout headers_t hdr, inout atp_meta_t meta) {
    ATP_LATE_LANES
    apply {
        ATP_LATE_LANES_APPLY
    }
}

control EarlyLanes(inout headers_t hdr, inout atp_meta_t meta) {
    ATP_EARLY_LANES
    apply {
        ATP_EARLY_LANES_APPLY
    }
}

#endif
