// ATP's switch pipeline for Tofino 1 (TNA): src/engines/switch/ stage for stage, with 73 values
// per packet in up to four passes (lanes.p4). docs/p4.md gives the design, the resource budget
// and how it fits.
// Shared with the v1model program: p4/common/ (headers, parser, validation, job table,
// classification, next step). Here: the TNA glue, the register stages as RegisterActions
// (aggregator.p4, values.p4), routing and multicast, and egress ECN from queue depth.
#include <core.p4>
#include <tna.p4>

#ifndef ATP_POOL
#define ATP_POOL 8192  // aggregators (a power of two: the index is masked)
#endif
#include "lanes.p4"  // ATP_LANES, the values per packet, and the passes that carry them

// Each pipe's recirculation port on Tofino 1 is port 68 of the pipe (68, 196, 324, 452): a
// packet goes round through its own pipe, whose registers hold its aggregator. Front-panel
// ports in loopback mode can share the load (loopback_ports, round_ports): docs/p4.md.
#define ATP_RECIRCULATION_PORT_IN_PIPE 68
#define ATP_LOOPBACK_PORTS 64  // at most, over all pipes: every front-panel port of a Tofino 1

#include "../common/parser.p4"
#include "../common/validate.p4"
#include "../common/job_table.p4"
#include "../common/classify.p4"
#include "../common/next_step.p4"
#include "../common/next_hop.p4"
#include "aggregator.p4"

parser AtpIngressParser(packet_in pkt, out headers_t hdr, out atp_meta_t meta,
                        out ingress_intrinsic_metadata_t ig_md) {
    // The front-panel ports in loopback mode that carry later passes besides port 68: what
    // comes in on them is a pass header and the packet behind it (the control plane adds them).
    value_set<bit<9>>(ATP_LOOPBACK_PORTS) loopback_ports;
    state start {
        pkt.extract(ig_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.is_atp = 0;
        meta.later_pass = 0;
        meta.leave = 0;
        transition select(ig_md.ingress_port) {
            ATP_RECIRCULATION_PORT_IN_PIPE &&& 0x7F : parse_pass;
            loopback_ports : parse_pass;
            default : parse_ethernet;
        }
    }
    // A later pass: the first pass checked the headers, so they are taken as they are (and
    // is_atp stays 0: no check runs).
    state parse_pass {
        pkt.extract(hdr.pass);
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.atp);
        meta.later_pass = 1;
        transition select(hdr.pass.pass) {
            ATP_LATER_PASS_SELECT
            default : accept;
        }
    }
    ATP_HEADER_STATES(start_values)
    state start_values {
        transition select(hdr.atp.value_count) {
            0 : accept;
            default : pass0_late_0;
        }
    }
    ATP_VALUE_STATES
}

control AtpIngress(inout headers_t hdr, inout atp_meta_t meta,
                   in ingress_intrinsic_metadata_t ig_md,
                   in ingress_intrinsic_metadata_from_parser_t prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t tm_md) {
    ValidateAtp() validate;
    JobTable() job_table;
    Classify() classify;
    AggregatorStages() aggregator;
    NextStep() next_step;
    LateLanes() late_lanes;
    EarlyLanes() early_lanes;

    // The claim clock (engines::ClaimClock): the control plane writes the epoch, counted from
    // 2, every stale_after / 2. Never written (0) reads as 2: nothing is ever taken over.
    Register<bit<32>, bit<1>>(1) claim_epoch;
    RegisterAction<bit<32>, bit<1>, bit<32>>(claim_epoch) read_epoch = {
        void apply(inout bit<32> e, out bit<32> bound) {
            if (e < 2) { bound = 0; } else { bound = e - 2; }
        }
    };
    // The members heard from (register heard, constants.p4): the control plane adds a member
    // below to the job's multicast group once its slot is set.
    Register<bit<8>, bit<16>>(ATP_MEMBER_SLOTS) heard;
    RegisterAction<bit<8>, bit<16>, bit<8>>(heard) mark_heard = {
        void apply(inout bit<8> h) { h = 1; }
    };
    // Packets per next step: the counters' one place.
    Counter<bit<64>, bit<8>>(STEPS, CounterType_t.PACKETS) next_steps;

    // The switch profile (SwitchConfig), one default action set by the control plane.
    action set_profile(bit<8> level, bit<32> pool_mask, bit<16> max_values, bit<8> policy) {
        meta.level = level;
        meta.pool_mask = pool_mask;
        meta.max_values = max_values;
        meta.policy = policy;
    }
    table profile {
        actions = { set_profile; }
        default_action = set_profile(LEVEL_RACK, ATP_POOL - 1, ATP_LANES, POLICY_ATP);
        size = 1;
    }

    // Everything that is not ATP: plain IPv4 forwarding.
    action ipv4_forward(PortId_t port, bit<48> dst_mac) {
        tm_md.ucast_egress_port = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action drop() { dprsr_md.drop_ctl = 1; }
    table ipv4_routes {
        key = { hdr.ipv4.dst : lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
        size = 1024;
    }

    // The next step's glue: which port or group the packet leaves by, after its last pass.
    action to_up_port() { tm_md.ucast_egress_port = (PortId_t)meta.up_port; }
    action to_answer_port() { tm_md.ucast_egress_port = (PortId_t)meta.answer_port; }
    action to_group() { tm_md.mcast_grp_a = meta.group; }
    action drop_it() { dprsr_md.drop_ctl = 1; }
    table leave_by {
        key = { meta.next_step : exact; }
        actions = { to_up_port; to_answer_port; to_group; drop_it; }
        const default_action = drop_it();
        const entries = {
            STEP_PASS_UP : to_up_port();
            STEP_COLLIDE_UP : to_up_port();
            STEP_FLUSH_UP : to_up_port();
            STEP_JOIN_UP : to_up_port();
            STEP_EMIT_SUM : to_up_port();
            STEP_MULTICAST_DOWN : to_group();
            STEP_ANSWER_DOWN : to_answer_port();
        }
        size = 16;
    }

    // A later pass takes what the first decided from the pass header. The table stands in stage
    // 4, beside the early lanes: stages 0-2 have no logical table to spare (docs/p4.md).
    action take_first_pass_decision() {
        meta.phase = hdr.pass.phase;
        meta.seen = hdr.pass.seen[0:0];
        meta.lane_index = hdr.pass.late_index;
        meta.next_step = hdr.pass.next_step;
        meta.up_port = (bit<9>)hdr.pass.up_port;
        meta.answer_port = (bit<9>)hdr.pass.answer_port;
        meta.group = hdr.pass.group;
    }
    @stage(4) table first_pass_decision {
        actions = { take_first_pass_decision; }
        const default_action = take_first_pass_decision();
        size = 1;
    }
    // The port a packet goes round through, chosen in its first pass by its aggregator and
    // kept for its later passes: every packet of an aggregator crosses the same port, so its
    // passes still reach the registers in the order of the first passes (docs/p4.md). By
    // default the pipe's own recirculation port; the control plane spreads the aggregators
    // over the pipe's port 68 and loopback ports, in turn over the index's low seven bits.
    action round_via_recirculation() {
        meta.round_port = ig_md.ingress_port[8:7] ++ (bit<7>)ATP_RECIRCULATION_PORT_IN_PIPE;
    }
    action round_via(PortId_t port) { meta.round_port = port; }
    @stage(8) table round_ports {
        key = {
            ig_md.ingress_port[8:7] : exact @name("pipe");
            meta.index[6:0] : exact @name("bucket");
        }
        actions = { round_via; round_via_recirculation; }
        const default_action = round_via_recirculation();
        size = 512;  // 4 pipes x 128 buckets: a port's share of a pipe's passes is within 1/128
    }
    // Another pass: the decision goes in front of the packet, which goes round its own pipe.
    // The lanes' rows for the next pass come with it, so that no stage computes them there.
    action first_go_round(bit<8> last_pass) {
        hdr.pass.setValid();
        hdr.pass.pass = 1;
        hdr.pass.last_pass = last_pass;
        hdr.pass.phase = meta.phase;
        hdr.pass.seen = 7w0 ++ meta.seen;
        hdr.pass.index = meta.index;
        hdr.pass.late_index = meta.index + ATP_POOL;
        hdr.pass.early_index = meta.index;
        hdr.pass.next_step = meta.next_step;
        hdr.pass.up_port = (bit<16>)meta.up_port;
        hdr.pass.answer_port = (bit<16>)meta.answer_port;
        hdr.pass.group = meta.group;
        tm_md.ucast_egress_port = meta.round_port;
    }
    action next_go_round() {
        hdr.pass.pass = hdr.pass.pass + 1;
        hdr.pass.late_index = hdr.pass.late_index + ATP_POOL;
        hdr.pass.early_index = hdr.pass.early_index + ATP_POOL;
        tm_md.ucast_egress_port = ig_md.ingress_port;  // round again the way it came
    }
    action last_pass() {
        hdr.pass.setInvalid();
        meta.leave = 1;
    }
    // The values beyond each pass, in a stage of their own: one with no input would otherwise
    // take a logical table in stages 0-2, which have none to spare.
    action plan_passes() {
        ATP_PLAN_PASSES
    }
    @stage(8) table pass_plan {
        actions = { plan_passes; }
        const default_action = plan_passes();
        size = 1;
    }
    // Leave, or go round again: a packet whose phase touches the lanes takes as many passes as
    // its values need.
    table pass_step {
        key = {
            meta.later_pass : exact;
            hdr.pass.pass : ternary;
            hdr.pass.last_pass : ternary;
            meta.phase : ternary;
            ATP_PASS_STEP_KEYS
        }
        actions = { first_go_round; next_go_round; last_pass; }
        const default_action = last_pass();
        const entries = {
            ATP_PASS_STEP_ENTRIES
        }
        size = 8;
    }

    apply {
        if (meta.is_atp == 0) {
            if (meta.later_pass == 1) {
                first_pass_decision.apply();
                early_lanes.apply(hdr, meta);
            } else if (hdr.ipv4.isValid()) {
                ipv4_routes.apply();
            } else {
                drop();
            }
        } else {
            profile.apply();
            // Validation and the job table side by side: the classify table refuses a malformed
            // packet before it reads any job fact.
            validate.apply(hdr, meta);
            if (prsr_md.parser_err != 0) { meta.bad_parse = 1; }
            job_table.apply(hdr, meta, (bit<9>)ig_md.ingress_port);
            classify.apply(hdr, meta);
            // A member below is heard once the job's packet from it passed the checks.
            if (meta.packet_class != CLASS_NONE && meta.downward == 0) {
                mark_heard.execute(meta.member_slot);
            }
            meta.owner_id = 1w0 ++ hdr.atp.job[14:0] ++ hdr.atp.tensor[31:16];
            meta.expired_at_or_before = read_epoch.execute(0);
            meta.packet_sticky = hdr.atp.flags & (FLAG_ECN | FLAG_WRAPPED);
            meta.packet_ecn = hdr.atp.flags & FLAG_ECN;
            meta.lane_index = meta.index;
            aggregator.apply(hdr, meta);
            pass_plan.apply();
            round_ports.apply();
        }
        // The late lanes come right after the stages that name the phase, in every pass; the
        // first pass's decision comes after them in the program and beside them in the stages
        // (a table after a branch is placed only once the branch's tables are).
        late_lanes.apply(hdr, meta);
        if (meta.is_atp == 1) {
            next_step.apply(hdr, meta);
            next_steps.count(meta.next_step);
            hdr.udp.checksum = 0;  // the payload may have changed; 0 = none (IPv4)
        }
        if (meta.is_atp == 1 || meta.later_pass == 1) {
            pass_step.apply();
            if (meta.leave == 1) { leave_by.apply(); }
        }
    }
}

control AtpIngressDeparser(packet_out pkt, inout headers_t hdr, in atp_meta_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t dprsr_md) {
    Checksum() ipv4_checksum;
    apply {
        // Plain forwarding changed the ttl; ATP packets keep their IPv4 header as it came.
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
            hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst });
        pkt.emit(hdr);
    }
}

// Egress: ECN is an egress fact. A fragment leaving through a queue at least `threshold` cells
// deep is marked (the aggregator's sticky bit carries the mark to the sum at the next switch).
// Egress parses up to the ATP header; the values stay payload.
struct atp_egress_meta_t {}

parser AtpEgressParser(packet_in pkt, out headers_t hdr, out atp_egress_meta_t eg_meta,
                       out egress_intrinsic_metadata_t eg_md) {
    atp_meta_t meta;
    // The ingress parser's loopback ports again: a packet going round through one has its pass
    // header in front, which must not be read as Ethernet (the control plane adds both).
    value_set<bit<9>>(ATP_LOOPBACK_PORTS) loopback_ports;
    state start {
        pkt.extract(eg_md);
        meta.is_atp = 0;
        transition select(eg_md.egress_port) {
            ATP_RECIRCULATION_PORT_IN_PIPE &&& 0x7F : accept;  // going round: all payload
            loopback_ports : accept;
            default : parse_ethernet;
        }
    }
    ATP_HEADER_STATES(accept)
}

control AtpEgress(inout headers_t hdr, inout atp_egress_meta_t meta,
                  in egress_intrinsic_metadata_t eg_md,
                  in egress_intrinsic_metadata_from_parser_t prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t oport_md) {
    NextHop() next_hop;
    // The threshold comes from the control plane (0: never mark); the compare is a
    // saturating subtraction, as a switch compares a field with a constant only.
    bit<19> below_threshold = 0;
    action set_ecn_threshold(bit<19> cells) { below_threshold = cells |-| eg_md.enq_qdepth; }
    action never_mark() { below_threshold = 1; }
    table ecn_profile {
        actions = { set_ecn_threshold; never_mark; }
        default_action = never_mark();
        size = 1;
    }
    apply {
        if (hdr.atp.isValid()) {
            if (hdr.atp.kind == KIND_FRAGMENT) {
                ecn_profile.apply();
                if (below_threshold == 0) { hdr.atp.flags = hdr.atp.flags | FLAG_ECN; }
            }
        }
        next_hop.apply(hdr, (bit<9>)eg_md.egress_port);
    }
}

control AtpEgressDeparser(packet_out pkt, inout headers_t hdr, in atp_egress_meta_t meta,
                          in egress_intrinsic_metadata_for_deparser_t dprsr_md) {
    Checksum() ipv4_checksum;
    apply {
        // The next hop rewrote the addresses of ATP packets.
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
            hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst });
        pkt.emit(hdr);
    }
}

Pipeline(AtpIngressParser(), AtpIngress(), AtpIngressDeparser(),
         AtpEgressParser(), AtpEgress(), AtpEgressDeparser()) pipe;
Switch(pipe) main;
