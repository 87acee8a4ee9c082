// Refusals, then which path the packet takes (SwitchPipeline::parse_and_check's outcome and
// ::classify), then the aggregator index. A refused packet gets its next step here and no
// register stage runs for it.
#ifndef ATP_CLASSIFY_P4
#define ATP_CLASSIFY_P4

#include "headers.p4"

control Classify(in headers_t hdr, inout atp_meta_t meta) {
    apply {
        meta.packet_class = CLASS_NONE;
        meta.fan_in_mismatch = 0;
        meta.has_index = 0;
        meta.index = 0;
        meta.contributor = 0;
        if (meta.malformed == 1) {
            meta.next_step = STEP_DROP_MALFORMED;
        } else if (meta.job_found == 0) {
            meta.next_step = STEP_DROP_UNKNOWN_JOB;
        } else if (hdr.atp.token != meta.token || meta.member_ok == 0) {
            meta.next_step = STEP_DROP_FORGED;
        } else if (meta.routed == 0 ||
                   (hdr.atp.kind == KIND_JOINED && meta.answer_ok == 0)) {
            meta.next_step = STEP_DROP_MALFORMED;
        } else {
            bool rack_level = meta.level == LEVEL_RACK;
            bit<8> f = hdr.atp.flags;
            // The aggregator index (policy atp: hashed by the worker; static: the slice).
            if (meta.policy == POLICY_ATP) {
                meta.has_index = 1;
                meta.index = hdr.atp.aggregator & meta.pool_mask;
            } else if (meta.policy == POLICY_STATIC && meta.has_slice == 1) {
                meta.has_index = 1;
                meta.index = meta.static_first + (hdr.atp.seq & meta.static_mask);
            }
            bit<8> claimed_fan_in = rack_level ? hdr.atp.rack_fan_in : hdr.atp.job_fan_in;
            if (hdr.atp.kind == KIND_JOIN) {
                meta.packet_class = CLASS_JOIN;
            } else if (hdr.atp.kind == KIND_JOINED) {
                meta.packet_class = CLASS_ANSWER;
            } else if (meta.downward == 1) {
                meta.packet_class = CLASS_RESULT;
            } else if (hdr.atp.next_level != meta.level || (f & FLAG_FLOAT_PAYLOAD) != 0 ||
                       meta.policy == POLICY_NONE) {
                meta.packet_class = CLASS_PASS;
            } else if (meta.has_index == 0) {
                meta.packet_class = (f & FLAG_RESEND) != 0 ? CLASS_PASS : CLASS_COLLIDE;
            } else if (claimed_fan_in != meta.fan_in) {
                meta.fan_in_mismatch = 1;
                meta.packet_class = CLASS_PASS;
            } else if ((f & FLAG_RESEND) != 0) {
                // Level 1 hears single workers; level 2 whole racks or one rack's part.
                bool shaped = rack_level
                    ? hdr.atp.racks_bitmap == 0 && meta.workers_single == 1
                    : hdr.atp.racks_bitmap == 0 || hdr.atp.workers_bitmap == 0;
                meta.packet_class = shaped ? CLASS_FLUSH : CLASS_PASS;
                // The resent contributor as the aggregator's bitmap names it.
                if (rack_level) {
                    meta.contributor = hdr.atp.workers_bitmap;
                } else if (hdr.atp.workers_bitmap == 0) {
                    meta.contributor = hdr.atp.racks_bitmap;
                } else {
                    meta.contributor = meta.rack_bit;
                }
            } else if (hdr.atp.value_count > meta.max_values) {
                meta.packet_class = CLASS_PASS;
            } else if (rack_level && hdr.atp.racks_bitmap == 0 && meta.workers_single == 1) {
                meta.packet_class = CLASS_AGGREGATE;
                meta.contributor = hdr.atp.workers_bitmap;
            } else if (!rack_level && hdr.atp.workers_bitmap == 0 && meta.racks_single == 1) {
                meta.packet_class = CLASS_AGGREGATE;
                meta.contributor = hdr.atp.racks_bitmap;
            } else {
                meta.packet_class = CLASS_PASS;
            }
        }
    }
}

#endif
