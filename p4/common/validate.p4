// proto::decode as match-action: every check that makes the C++ pipeline drop a packet as
// malformed sets its own bit (meta.bad_*; the classify table refuses a packet with any), and
// the bit facts later stages use. Written for a
// switch ALU: each check is one comparison of a header field or of one computed value.
#ifndef ATP_VALIDATE_P4
#define ATP_VALIDATE_P4

#include "bit_tables.p4"

control ValidateAtp(in headers_t hdr, inout atp_meta_t meta) {
    ContributorIndex() workers_index;
    ContributorIndex() racks_index;
    FanInLimit() rack_fan_in_limit;
    FanInLimit() job_fan_in_limit;
    RackBit() rack_bit;

    // What the checks compare, one ALU operation each, in keyless tables: a switch compares a
    // field with a constant, not an expression.
    action facts() {
        meta.value_bytes = hdr.atp.value_count << 2;
        meta.payload_bytes = hdr.udp.length - (8 + ATP_HEADER_BYTES);
        meta.stray_workers = hdr.atp.workers_bitmap & ~meta.workers_limit;
        meta.stray_racks = hdr.atp.racks_bitmap & ~meta.racks_limit;
        meta.rack_overlap = hdr.atp.racks_bitmap & meta.rack_bit;
        meta.racks_beyond = hdr.atp.job_fan_in |-| hdr.atp.rack;  // 0: rack >= job_fan_in
        meta.any_bitmap = hdr.atp.workers_bitmap | hdr.atp.racks_bitmap;
        meta.values_beyond_max = hdr.atp.value_count |-| ATP_MAX_VALUES;
        meta.values_beyond_pass = hdr.atp.value_count |-| meta.max_values;
    }
    table derive_facts {
        actions = { facts; }
        const default_action = facts();
        size = 1;
    }

    // Rules on the header's kind, flags and value count alone (proto::decode): the run
    // handshake and a result query carry no flags, no values and no racks; a fragment's flags
    // combine sensibly and an upward fragment carries values. First match wins.
    action header_ok() {}
    action header_bad() { meta.bad_header = 1; }
    table header_rules {
        key = {
            hdr.atp.kind : ternary;
            hdr.atp.flags : ternary;
            hdr.atp.value_count : ternary;
            hdr.atp.racks_bitmap : ternary;
        }
        actions = { header_ok; header_bad; }
        const default_action = header_ok();
        const entries = {
            (KIND_JOIN, 0, 0, 0) : header_ok();
            (KIND_JOINED, 0, 0, 0) : header_ok();
            (KIND_QUERY, 0, 0, 0) : header_ok();
            (KIND_JOIN, _, _, _) : header_bad();
            (KIND_JOINED, _, _, _) : header_bad();
            (KIND_QUERY, _, _, _) : header_bad();
            // result and float request at once
            (KIND_FRAGMENT, FLAG_RESULT | FLAG_FLOAT_REQUEST &&& FLAG_RESULT | FLAG_FLOAT_REQUEST, _, _) : header_bad();
            // downward with resend, or a float request with collision (a result may carry it)
            (KIND_FRAGMENT, FLAG_RESULT | FLAG_RESEND &&& FLAG_RESULT | FLAG_RESEND, _, _) : header_bad();
            (KIND_FRAGMENT, FLAG_FLOAT_REQUEST | FLAG_RESEND &&& FLAG_FLOAT_REQUEST | FLAG_RESEND, _, _) : header_bad();
            (KIND_FRAGMENT, FLAG_FLOAT_REQUEST | FLAG_COLLISION &&& FLAG_FLOAT_REQUEST | FLAG_COLLISION, _, _) : header_bad();
            // wrapped floats
            (KIND_FRAGMENT, FLAG_WRAPPED | FLAG_FLOAT_PAYLOAD &&& FLAG_WRAPPED | FLAG_FLOAT_PAYLOAD, _, _) : header_bad();
            // remap only on a result
            (KIND_FRAGMENT, FLAG_REMAP &&& FLAG_REMAP | FLAG_RESULT, _, _) : header_bad();
            // an upward fragment without values
            (KIND_FRAGMENT, 0 &&& FLAG_RESULT | FLAG_FLOAT_REQUEST, 0, _) : header_bad();
        }
        size = 16;
    }

    apply {
        meta.bad_header = 0;
        meta.bad_parse = 0;
        meta.bad_version = 0;
        meta.bad_results_behind = 0;
        meta.bad_kind = 0;
        meta.bad_level = 0;
        meta.bad_value_count = 0;
        meta.bad_length = 0;
        meta.bad_handshake_worker = 0;
        meta.bad_fan_in = 0;
        meta.bad_rack = 0;
        meta.bad_workers = 0;
        meta.bad_racks = 0;
        meta.bad_no_contributor = 0;
        meta.bad_own_rack = 0;
        bit<1> rack_fan_in_ok;
        bit<1> job_fan_in_ok;
        workers_index.apply(hdr.atp.workers_bitmap, meta.workers_single, meta.workers_index);
        racks_index.apply(hdr.atp.racks_bitmap, meta.racks_single, meta.racks_index);
        rack_fan_in_limit.apply(hdr.atp.rack_fan_in, rack_fan_in_ok, meta.workers_limit);
        job_fan_in_limit.apply(hdr.atp.job_fan_in, job_fan_in_ok, meta.racks_limit);
        rack_bit.apply(hdr.atp.rack, meta.rack_bit);

        derive_facts.apply();
        header_rules.apply();

        // Each check sets its own bit, so a switch evaluates them side by side; `verdict` ORs
        // them. (Handshake and flag rules are the table header_rules.)
        meta.downward = 0;
        if (hdr.atp.kind == KIND_JOINED || (hdr.atp.flags & (FLAG_RESULT | FLAG_FLOAT_REQUEST)) != 0) {
            meta.downward = 1;
        }
        if (hdr.atp.version != ATP_VERSION) { meta.bad_version = 1; }
        // Only a result says which earlier results its PS had sent (protocol.md §2).
        if (hdr.atp.results_behind != 0 && (hdr.atp.flags & FLAG_RESULT) == 0) {
            meta.bad_results_behind = 1;
        }
        if (hdr.atp.kind > KIND_QUERY) { meta.bad_kind = 1; }
        if (hdr.atp.next_level > LEVEL_SPINE) { meta.bad_level = 1; }
        if (meta.values_beyond_max != 0) { meta.bad_value_count = 1; }
        if (meta.payload_bytes != meta.value_bytes) { meta.bad_length = 1; }
        if (hdr.atp.kind != KIND_FRAGMENT) {
            if (meta.workers_single == 0) { meta.bad_handshake_worker = 1; }
        }
        // Contributors (protocol.md §5).
        if (rack_fan_in_ok == 0 || job_fan_in_ok == 0) { meta.bad_fan_in = 1; }
        if (meta.racks_beyond == 0) { meta.bad_rack = 1; }
        if (meta.stray_workers != 0) { meta.bad_workers = 1; }
        if (meta.stray_racks != 0) { meta.bad_racks = 1; }
        if (meta.downward == 0) {
            if (meta.any_bitmap == 0) { meta.bad_no_contributor = 1; }
            if (hdr.atp.workers_bitmap != 0) {
                if (meta.rack_overlap != 0) { meta.bad_own_rack = 1; }
            }
        }
    }
}

#endif
