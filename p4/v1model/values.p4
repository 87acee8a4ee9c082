// The value registers: one array per lane, each lane a read-modify-write returning its value
// after into the packet. A pass runs the lanes of its values only, [meta.pass_first,
// meta.pass_end): the passes of the TNA program (constants.p4), taken here one lane per value.
#ifndef ATP_V1MODEL_VALUES_P4
#define ATP_V1MODEL_VALUES_P4

#include "../common/headers.p4"
#include "lanes.p4"

#define ATP_LANE_REGISTER(i) register<bit<32>>(ATP_POOL) lane_##i;

// start keeps the packet's value; add writes the sum into register and packet; read copies
// the register into the packet; into_packet (a flush) adds the register into the packet only.
// An int32 addition overflowed when both operands' signs differ from the sum's.
#define ATP_LANE_APPLY(i)                                                       \
    if (hdr.values[i].isValid() && meta.pass_first <= i && i < meta.pass_end) {  \
        bit<32> r;                                                              \
        lane_##i.read(r, meta.index);                                           \
        bit<32> v = hdr.values[i].v;                                            \
        bit<32> sum = r + v;                                                    \
        bit<1> ov = ((r ^ sum) & (v ^ sum))[31:31];                             \
        if (meta.update == UPDATE_START) {                                      \
            r = v;                                                              \
        } else if (meta.update == UPDATE_ADD) {                                 \
            r = sum;                                                            \
            hdr.values[i].v = sum;                                              \
            meta.overflow = meta.overflow | ov;                                 \
        } else if (meta.update == UPDATE_READ) {                                \
            hdr.values[i].v = r;                                                \
        } else if (meta.update == UPDATE_INTO_PACKET) {                         \
            hdr.values[i].v = sum;                                              \
            meta.overflow = meta.overflow | ov;                                 \
        }                                                                       \
        lane_##i.write(meta.index, r);                                          \
    }

control ValueLanes(inout headers_t hdr, inout atp_meta_t meta) {
    ATP_FOR_EACH_LANE(ATP_LANE_REGISTER)
    apply {
        meta.lane_update = meta.update;
        ATP_FOR_EACH_LANE(ATP_LANE_APPLY)
    }
}

#endif
