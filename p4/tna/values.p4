// The value lanes on Tofino: one Register per lane (values[0] of AggregatorRegisters, one pass
// of ATP_LANES lanes), each lane one stateful ALU with four RegisterActions.
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

// start keeps the packet's value; add writes the sum into register and packet; read copies the
// register into the packet; into_packet (a flush) adds the register into the packet only.
#define ATP_LANE_ACTIONS(i)                                                             \
    Register<bit<32>, bit<32>>(ATP_POOL) lane_##i;                                      \
    RegisterAction<bit<32>, bit<32>, bit<32>>(lane_##i) lane_##i##_start = {            \
        void apply(inout bit<32> r) { r = hdr.values[i].v; }                            \
    };                                                                                  \
    RegisterAction<bit<32>, bit<32>, bit<32>>(lane_##i) lane_##i##_add = {              \
        void apply(inout bit<32> r, out bit<32> sum) { r = r + hdr.values[i].v; sum = r; } \
    };                                                                                  \
    RegisterAction<bit<32>, bit<32>, bit<32>>(lane_##i) lane_##i##_read = {             \
        void apply(inout bit<32> r, out bit<32> value) { value = r; }                   \
    };                                                                                  \
    RegisterAction<bit<32>, bit<32>, bit<32>>(lane_##i) lane_##i##_into_packet = {      \
        void apply(inout bit<32> r, out bit<32> sum) { sum = r + hdr.values[i].v; }     \
    };

// Each lane's table picks its action from the phase and whether the aggregator had the
// packet's contribution already; lanes the packet does not carry are left alone.
#define ATP_LANE_TABLE(i)                                                               \
    action lane_##i##_do_start() { lane_##i##_start.execute(meta.index); }              \
    action lane_##i##_do_add() { hdr.values[i].v = lane_##i##_add.execute(meta.index); } \
    action lane_##i##_do_read() { hdr.values[i].v = lane_##i##_read.execute(meta.index); } \
    action lane_##i##_do_into_packet() {                                                \
        hdr.values[i].v = lane_##i##_into_packet.execute(meta.index);                   \
    }                                                                                   \
    table lane_##i##_stage {                                                            \
        key = { hdr.values[i].isValid() : exact; meta.phase : exact; meta.seen : exact; } \
        actions = { lane_##i##_do_start; lane_##i##_do_add; lane_##i##_do_read;         \
                    lane_##i##_do_into_packet; NoAction; }                              \
        const default_action = NoAction();                                              \
        const entries = {                                                               \
            (true, PHASE_START, 0) : lane_##i##_do_start();                             \
            (true, PHASE_JOIN, 0) : lane_##i##_do_add();                                \
            (true, PHASE_JOIN, 1) : lane_##i##_do_read();                               \
            (true, PHASE_FLUSH, 0) : lane_##i##_do_into_packet();                       \
            (true, PHASE_FLUSH, 1) : lane_##i##_do_read();                              \
        }                                                                               \
        size = 8;                                                                       \
    }

#define ATP_LANE_APPLY(i) lane_##i##_stage.apply();

control ValueLanes(inout headers_t hdr, inout atp_meta_t meta) {
    ATP_FOR_EACH_LANE(ATP_LANE_ACTIONS)
    ATP_FOR_EACH_LANE(ATP_LANE_TABLE)
    apply {
        ATP_FOR_EACH_LANE(ATP_LANE_APPLY)
    }
}

#endif
