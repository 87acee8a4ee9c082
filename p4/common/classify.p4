// Refusals, then which path the packet takes (SwitchPipeline::parse_and_check's outcome and
// ::classify), then the aggregator index. A refused packet gets its next step here and no
// register stage runs for it. The decision is one ternary table over facts computed side by
// side (a switch evaluates a table in one stage where a chain of ifs takes one stage each).
#ifndef ATP_CLASSIFY_P4
#define ATP_CLASSIFY_P4

#include "headers.p4"

control Classify(in headers_t hdr, inout atp_meta_t meta) {
    // One ALU operation each, in keyless tables (a switch compares a field with a constant).
    action derive() {
        meta.static_slot = hdr.atp.seq & meta.static_mask;
        meta.token_diff = hdr.atp.token ^ meta.token;
        meta.keyed_seq = hdr.atp.seq ^ meta.token;
        meta.masked_index = hdr.atp.aggregator & meta.pool_mask;
        meta.fan_in_less_one = meta.fan_in - 1;
    }
    table derive_facts {
        actions = { derive; }
        const default_action = derive();
        size = 1;
    }

    action refuse(bit<8> step) { meta.next_step = step; }
    action take(bit<8> packet_class) { meta.packet_class = packet_class; }
    action fan_in_mismatch() { meta.packet_class = CLASS_PASS; meta.fan_in_mismatch = 1; }
    // The contribution as the aggregator's bitmap names it: a worker, a rack's sum, or (a
    // level-2 resend of part of one rack) that rack.
    action take_workers(bit<8> packet_class) {
        meta.packet_class = packet_class;
        meta.contributor = hdr.atp.workers_bitmap;
    }
    action take_racks(bit<8> packet_class) {
        meta.packet_class = packet_class;
        meta.contributor = hdr.atp.racks_bitmap;
    }
    action take_rack_bit(bit<8> packet_class) {
        meta.packet_class = packet_class;
        meta.contributor = meta.rack_bit;
    }
    // First match wins: the order of SwitchPipeline::parse_and_check, then ::classify.
    table classify {
        key = {
            meta.bad_parse : ternary;
            meta.bad_header : ternary;
            meta.bad_version : ternary;
            meta.bad_results_behind : ternary;
            meta.bad_kind : ternary;
            meta.bad_level : ternary;
            meta.bad_value_count : ternary;
            meta.bad_length : ternary;
            meta.bad_handshake_worker : ternary;
            meta.bad_fan_in : ternary;
            meta.bad_rack : ternary;
            meta.bad_workers : ternary;
            meta.bad_racks : ternary;
            meta.bad_no_contributor : ternary;
            meta.bad_own_rack : ternary;
            meta.job_found : ternary;
            meta.token_ok : ternary;
            meta.member_ok : ternary;
            meta.routed : ternary;
            hdr.atp.kind : ternary;
            meta.answer_ok : ternary;
            meta.downward : ternary;
            meta.level_match : ternary;
            hdr.atp.flags : ternary;
            meta.policy : ternary;
            meta.has_slice : ternary;
            meta.level : ternary;
            meta.fan_in_match : ternary;
            meta.racks_zero : ternary;
            meta.workers_zero : ternary;
            meta.workers_single : ternary;
            meta.racks_single : ternary;
            meta.values_fit : ternary;
        }
        actions = { refuse; take; fan_in_mismatch; take_workers; take_racks; take_rack_bit; }
        const default_action = take(CLASS_PASS);
        const entries = {
            // the 15 bad_* bits, job, token, member, routed, kind, answer, down, level_match, flags,
            // policy, slice, level, fan_in_match, racks0, workers0, w_single, r_single, fit
            (1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            // a result names every worker (no bit) or one (a late copy for its asker)
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_FRAGMENT, _, _, _, FLAG_RESULT &&& FLAG_RESULT, _, _, _, _, _, 0, 0, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_UNKNOWN_JOB);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_FORGED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_FORGED);
            // a member below names itself alone (the members table keys on the one it names):
            // level 1 one worker and no rack; level 2 one rack, or workers of its own rack
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, LEVEL_RACK, _, 0, _, _, _, _) : refuse(STEP_DROP_FORGED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, LEVEL_RACK, _, _, _, 0, _, _) : refuse(STEP_DROP_FORGED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, LEVEL_SPINE, _, 0, _, _, 0, _) : refuse(STEP_DROP_FORGED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, LEVEL_SPINE, _, 0, 0, _, _, _) : refuse(STEP_DROP_FORGED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_JOINED, 0, _, _, _, _, _, _, _, _, _, _, _, _) : refuse(STEP_DROP_MALFORMED);
            // a late copy for one worker the switch has no member for
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_FRAGMENT, 0, 1, _, FLAG_RESULT &&& FLAG_RESULT, _, _, _, _, _, 0, _, _, _) : refuse(STEP_DROP_MALFORMED);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_JOIN, _, _, _, _, _, _, _, _, _, _, _, _, _) : take(CLASS_JOIN);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_JOINED, _, _, _, _, _, _, _, _, _, _, _, _, _) : take(CLASS_ANSWER);
            // a result query is the PS's alone, whatever level it names
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, KIND_QUERY, _, _, _, _, _, _, _, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 1, _, _, _, _, _, _, _, _, _, _, _) : take(CLASS_RESULT);
            // not ours to aggregate: another level's packet, floats, or no aggregation at all
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_FLOAT_PAYLOAD &&& FLAG_FLOAT_PAYLOAD, _, _, _, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, POLICY_NONE, _, _, _, _, _, _, _, _) : take(CLASS_PASS);
            // static policy without a slice here: the PS does all the work
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, POLICY_STATIC, 0, _, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, POLICY_STATIC, 0, _, _, _, _, _, _, _) : take(CLASS_COLLIDE);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0, _, _, _, _, _) : fan_in_mismatch();
            // resends: level 1 hears single workers; level 2 whole racks or one rack's part
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, LEVEL_RACK, _, 1, _, 1, _, _) : take_workers(CLASS_FLUSH);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, LEVEL_RACK, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, LEVEL_SPINE, _, _, 1, _, _, _) : take_racks(CLASS_FLUSH);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, LEVEL_SPINE, _, 1, _, _, _, _) : take_rack_bit(CLASS_FLUSH);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, FLAG_RESEND &&& FLAG_RESEND, _, _, _, _, _, _, _, _, _) : take(CLASS_PASS);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, 0) : take(CLASS_PASS);
            // level 1 adds single workers' fragments; level 2 whole racks' sums
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, LEVEL_RACK, _, 1, _, 1, _, _) : take_workers(CLASS_AGGREGATE);
            (_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, LEVEL_SPINE, _, _, 1, _, 1, _) : take_racks(CLASS_AGGREGATE);
        }
        size = 64;
    }

    apply {
        meta.packet_class = CLASS_NONE;
        meta.fan_in_mismatch = 0;
        meta.has_index = 0;
        meta.index = 0;
        meta.contributor = 0;
        derive_facts.apply();
        // The facts the table matches, each one comparison.
        meta.token_ok = 0;
        meta.level_match = 0;
        meta.fan_in_match = 0;
        meta.racks_zero = 0;
        meta.workers_zero = 0;
        meta.values_fit = 0;
        if (meta.token_diff == 0) { meta.token_ok = 1; }
        if (hdr.atp.next_level == meta.level) { meta.level_match = 1; }
        if (meta.level == LEVEL_RACK) {
            if (hdr.atp.rack_fan_in == meta.fan_in) { meta.fan_in_match = 1; }
        } else {
            if (hdr.atp.job_fan_in == meta.fan_in) { meta.fan_in_match = 1; }
        }
        if (hdr.atp.racks_bitmap == 0) { meta.racks_zero = 1; }
        if (hdr.atp.workers_bitmap == 0) { meta.workers_zero = 1; }
        if (meta.values_beyond_pass == 0) { meta.values_fit = 1; }
        meta.level_after = LEVEL_PS;
        if (meta.level == LEVEL_RACK && hdr.atp.job_fan_in > 1) { meta.level_after = LEVEL_SPINE; }
        // The aggregator index (policy atp: hashed by the worker; static: the slice).
        if (meta.policy == POLICY_ATP) {
            meta.has_index = 1;
            meta.index = meta.masked_index;
        } else if (meta.policy == POLICY_STATIC) {
            if (meta.has_slice == 1) {
                meta.has_index = 1;
                meta.index = meta.static_first + meta.static_slot;
            }
        }
        // A resend request (a float request naming workers) frees nothing on its way down:
        // the aggregator it names may hold a rack's partial sum the PS still needs. (A result
        // naming a worker frees as every result does.)
        if ((hdr.atp.flags & FLAG_FLOAT_REQUEST) != 0 && meta.workers_zero == 0) { meta.has_index = 0; }
        classify.apply();
    }
}

#endif
