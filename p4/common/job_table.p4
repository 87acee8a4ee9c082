// The job table and the tenant checks (SwitchPipeline::parse_and_check): job entry, token,
// ingress port per direction, the route toward the PS shard, and the port of the member a
// run-handshake answer names. The control plane (atp p4 config) fills every table.
#ifndef ATP_JOB_TABLE_P4
#define ATP_JOB_TABLE_P4

#include "headers.p4"

control JobTable(in headers_t hdr, inout atp_meta_t meta, in bit<9> ingress_port) {
    action set_job(bit<32> token, bit<8> fan_in, bit<32> window, bit<32> static_first,
                   bit<32> static_mask, bit<1> has_slice, bit<16> group) {
        meta.job_found = 1;
        meta.token = token;
        meta.fan_in = fan_in;
        meta.window = window;
        meta.static_first = static_first;
        meta.static_mask = static_mask;
        meta.has_slice = has_slice;
        meta.group = group;
    }
    table jobs {
        key = { hdr.atp.job : exact; }
        actions = { set_job; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    // Upward packets arrive from the job's members below, downward ones from its hops up.
    action member() { meta.member_ok = 1; }
    table members {
        key = {
            hdr.atp.job   : exact;
            ingress_port  : exact;
            meta.downward : exact;
        }
        actions = { member; NoAction; }
        default_action = NoAction();
        size = 16384;
    }

    // One entry per ps_index, or a single one matching every ps_index.
    action up(bit<9> port) { meta.routed = 1; meta.up_port = port; }
    table routes_up {
        key = {
            hdr.atp.job      : exact;
            hdr.atp.ps_index : ternary;
        }
        actions = { up; NoAction; }
        default_action = NoAction();
        size = 8192;
    }

    action answer_to(bit<9> port) { meta.answer_ok = 1; meta.answer_port = port; }
    table answers {
        key = {
            hdr.atp.job        : exact;
            meta.workers_index : exact;  // level 1: the worker's bit; level 2: the rack
        }
        actions = { answer_to; NoAction; }
        default_action = NoAction();
        size = 16384;
    }

    apply {
        meta.job_found = 0;
        meta.member_ok = 0;
        meta.routed = 0;
        meta.answer_ok = 0;
        jobs.apply();
        if (meta.job_found == 1) {
            members.apply();
            routes_up.apply();
            if (hdr.atp.kind == KIND_JOINED) {
                if (meta.level == LEVEL_SPINE) { meta.workers_index = hdr.atp.rack; }
                answers.apply();
            }
        }
    }
}

#endif
