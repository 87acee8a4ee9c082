// The job table and the tenant checks (SwitchPipeline::parse_and_check): job entry, token,
// ingress port per direction, the route toward the PS shard, and the port of the member a
// run-handshake answer names. The control plane (atp p4 config) fills every table.
#ifndef ATP_JOB_TABLE_P4
#define ATP_JOB_TABLE_P4

#include "headers.p4"

control JobTable(in headers_t hdr, inout atp_meta_t meta, in bit<9> ingress_port) {
    action set_job(bit<32> token, bit<8> fan_in, bit<32> static_first, bit<32> static_mask,
                   bit<1> has_slice, bit<16> group) {
        meta.job_found = 1;
        meta.token = token;
        meta.fan_in = fan_in;
        meta.static_first = static_first;
        meta.static_mask = static_mask;
        meta.has_slice = has_slice;
        meta.group = group;
    }
    action unknown_job() { meta.job_found = 0; }
    table jobs {
        key = { hdr.atp.job : exact; }
        actions = { set_job; unknown_job; }
        default_action = unknown_job();
        size = 4096;
    }

    // Upward packets arrive from the job's members below, each speaking for itself alone (its
    // own rank's bit at level 1, its own rack at level 2: the member the packet claims to be is
    // part of the key); downward ones from its hops up.
    action member(bit<16> slot) { meta.member_ok = 1; meta.member_slot = slot; }
    action stranger() { meta.member_ok = 0; }
    table members {
        key = {
            hdr.atp.job         : exact;
            ingress_port        : exact;
            meta.downward       : exact;
            meta.claimed_member : exact;
        }
        actions = { member; stranger; }
        default_action = stranger();
        size = ATP_MEMBER_SLOTS;
    }

    // One entry per ps_index, or a single one matching every ps_index.
    action up(bit<9> port) { meta.routed = 1; meta.up_port = port; }
    action no_route() { meta.routed = 0; }
    table routes_up {
        key = {
            hdr.atp.job      : exact;
            hdr.atp.ps_index : ternary;
        }
        actions = { up; no_route; }
        default_action = no_route();
        size = 8192;
    }

    action answer_to(bit<9> port) { meta.answer_ok = 1; meta.answer_port = port; }
    action no_member() { meta.answer_ok = 0; }
    table answers {
        key = {
            hdr.atp.job        : exact;
            meta.answer_member : exact;  // level 1: the worker's bit; level 2: the rack
        }
        actions = { answer_to; no_member; }
        default_action = no_member();
        size = 16384;
    }

    // Which member the packet names. Upward: the one it speaks for (level 1: its worker's bit;
    // level 2: its rack's sum, or with workers, part of its rack). Downward: the member a
    // run-handshake answer or a late copy for one worker goes to (level 1: the worker's bit;
    // level 2: the rack). A bitmap with more bits than one gives index 0: the classify table
    // refuses it before it reads member_ok.
    action claims_none() { meta.claimed_member = 0; meta.answer_member = 0; }
    action claims_worker() { meta.claimed_member = meta.workers_index; meta.answer_member = 0; }
    action claims_racks() { meta.claimed_member = meta.racks_index; meta.answer_member = 0; }
    action claims_rack() { meta.claimed_member = hdr.atp.rack; meta.answer_member = 0; }
    action answers_worker() { meta.claimed_member = 0; meta.answer_member = meta.workers_index; }
    action answers_rack() { meta.claimed_member = 0; meta.answer_member = hdr.atp.rack; }
    table named_member {
        key = {
            meta.downward : exact;
            meta.level : exact;
            hdr.atp.workers_bitmap : ternary;
        }
        actions = { claims_none; claims_worker; claims_racks; claims_rack; answers_worker; answers_rack; }
        const default_action = claims_none();
        const entries = {
            (0, LEVEL_RACK, _) : claims_worker();
            (0, LEVEL_SPINE, 0) : claims_racks();
            (0, LEVEL_SPINE, _) : claims_rack();
            (1, LEVEL_RACK, _) : answers_worker();
            (1, LEVEL_SPINE, _) : answers_rack();
        }
        size = 8;
    }

    // Every table sets its facts on a miss too, so the four look up side by side (the
    // classify table reads them in order: an unknown job's other facts do not matter).
    apply {
        named_member.apply();
        jobs.apply();
        members.apply();
        routes_up.apply();
        answers.apply();
    }
}

#endif
