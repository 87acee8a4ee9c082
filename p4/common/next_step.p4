// The next-step stage (SwitchPipeline::decide's last step and ::apply): one decision from the
// metadata the stages computed, then the header rewrite it implies. Which port or group the
// packet leaves by is left in meta for the target's glue (egress_spec / ucast_egress_port).
#ifndef ATP_NEXT_STEP_P4
#define ATP_NEXT_STEP_P4

#include "headers.p4"

control NextStep(inout headers_t hdr, inout atp_meta_t meta) {
    apply {
        bit<8> c = meta.packet_class;
        bool complete = meta.count_after >= meta.fan_in;
        if (c == CLASS_NONE) {
            // refused: meta.next_step is set already
        } else if (c == CLASS_JOIN) {
            meta.next_step = STEP_JOIN_UP;
        } else if (c == CLASS_ANSWER) {
            meta.next_step = STEP_ANSWER_DOWN;
        } else if (c == CLASS_RESULT) {
            meta.next_step = STEP_MULTICAST_DOWN;
        } else if (c == CLASS_PASS) {
            meta.next_step = STEP_PASS_UP;
        } else if (c == CLASS_COLLIDE) {
            meta.next_step = STEP_COLLIDE_UP;
        } else if (c == CLASS_FLUSH) {
            meta.next_step = (meta.owner == SEQ_SAME && meta.size_ok == 1) ? STEP_FLUSH_UP
                                                                              : STEP_PASS_UP;
        } else if (meta.owner == SEQ_OTHER || meta.size_ok == 0) {
            meta.next_step = STEP_COLLIDE_UP;
        } else if (meta.duplicate == 1) {
            meta.next_step = complete ? STEP_EMIT_SUM : STEP_DROP_DUPLICATE;
        } else {
            meta.next_step = complete ? STEP_EMIT_SUM : STEP_ABSORB;
        }

        bit<8> s = meta.next_step;
        bit<8> level_after = (meta.level == LEVEL_RACK && hdr.atp.job_fan_in > 1) ? LEVEL_SPINE
                                                                                   : LEVEL_PS;
        if (s == STEP_COLLIDE_UP) {
            hdr.atp.flags = hdr.atp.flags | FLAG_COLLISION;
        } else if (s == STEP_EMIT_SUM) {
            hdr.atp.racks_bitmap = meta.level == LEVEL_RACK ? meta.rack_bit
                                                            : meta.bitmap_before | meta.contributor;
            hdr.atp.workers_bitmap = 0;
            bit<8> f = hdr.atp.flags & ~(FLAG_WRAPPED | FLAG_COLLISION);
            if (meta.ecn_after == 1) { f = f | FLAG_ECN; }
            if (meta.wrapped_after == 1) { f = f | FLAG_WRAPPED; }
            hdr.atp.flags = f;
            hdr.atp.next_level = level_after;
        } else if (s == STEP_FLUSH_UP) {
            // The flush's contributors (SwitchPipeline::flush).
            bit<32> all = meta.bitmap_before | (meta.absent == 1 ? meta.contributor : 0);
            if (meta.level == LEVEL_RACK) {
                bit<8> total = meta.count_after + (meta.absent == 1 ? 8w1 : 8w0);
                bool rack_complete = total == meta.fan_in;
                hdr.atp.racks_bitmap = rack_complete ? meta.rack_bit : 0;
                hdr.atp.workers_bitmap = rack_complete ? 32w0 : all;
            } else if (hdr.atp.workers_bitmap == 0) {
                hdr.atp.racks_bitmap = all;
            } else {
                hdr.atp.racks_bitmap = meta.bitmap_before;
                hdr.atp.workers_bitmap = meta.absent == 1 ? hdr.atp.workers_bitmap : 32w0;
            }
            bit<8> f = hdr.atp.flags & ~(FLAG_WRAPPED | FLAG_COLLISION | FLAG_ECN);
            if (meta.ecn_after == 1) { f = f | FLAG_ECN; }
            if (meta.wrapped_after == 1) { f = f | FLAG_WRAPPED; }
            hdr.atp.flags = f;
        }
        bool upward = s == STEP_PASS_UP || s == STEP_COLLIDE_UP || s == STEP_FLUSH_UP ||
                      s == STEP_JOIN_UP || s == STEP_EMIT_SUM;
        if (upward && hdr.atp.next_level == meta.level) {
            hdr.atp.next_level = level_after;
        }
    }
}

#endif
