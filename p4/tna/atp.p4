// ATP's switch pipeline for Tofino 1 (TNA): src/engines/switch/ stage for stage, with the
// value lanes of one pass. docs/p4.md gives the design, the resource budget and how it fits.
// Shared with the v1model program: p4/common/ (headers, parser, validation, job table,
// classification, next step). Here: the TNA glue, the register stages as RegisterActions
// (aggregator.p4, values.p4), routing and multicast, and egress ECN from queue depth.
#include <core.p4>
#include <tna.p4>

#ifndef ATP_POOL
#define ATP_POOL 32768  // aggregators (a power of two: the index is masked)
#endif
#include "lanes.p4"  // ATP_LANES, the values per pass

#include "../common/parser.p4"
#include "../common/validate.p4"
#include "../common/job_table.p4"
#include "../common/classify.p4"
#include "../common/next_step.p4"
#include "../common/next_hop.p4"
#include "aggregator.p4"

// Lane i's state: take value i, stop after value_count of them.
#define ATP_VALUE_STATE(i, next)                                \
    state parse_value_##i {                                     \
        pkt.extract(hdr.values[i]);                             \
        transition select(hdr.atp.value_count) {                \
            next : accept;                                      \
            default : parse_value_##next;                       \
        }                                                       \
    }

parser AtpIngressParser(packet_in pkt, out headers_t hdr, out atp_meta_t meta,
                        out ingress_intrinsic_metadata_t ig_md) {
    state start {
        pkt.extract(ig_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.is_atp = 0;
        transition parse_ethernet;
    }
    ATP_HEADER_STATES(start_values)
    state start_values {
        transition select(hdr.atp.value_count) {
            1 .. ATP_LANES : parse_value_0;
            default : accept;  // no values, or more than a pass holds: classify passes them
        }
    }
    ATP_FOR_EACH_LANE_STATE(ATP_VALUE_STATE)
    state ATP_LAST_VALUE_STATE { transition accept; }
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

    // The next step's glue: which port or group the packet leaves by.
    action to_port(PortId_t port) { tm_md.ucast_egress_port = port; }
    action to_group() { tm_md.mcast_grp_a = meta.group; }

    apply {
        if (meta.is_atp == 0) {
            if (hdr.ipv4.isValid()) { ipv4_routes.apply(); } else { drop(); }
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
            aggregator.apply(hdr, meta);
            next_step.apply(hdr, meta);
            next_steps.count(meta.next_step);

            bit<8> s = meta.next_step;
            if (s == STEP_PASS_UP || s == STEP_COLLIDE_UP || s == STEP_FLUSH_UP ||
                s == STEP_JOIN_UP || s == STEP_EMIT_SUM) {
                to_port((PortId_t)meta.up_port);
            } else if (s == STEP_MULTICAST_DOWN) {
                to_group();
            } else if (s == STEP_ANSWER_DOWN) {
                to_port((PortId_t)meta.answer_port);
            } else {
                drop();
            }
            hdr.udp.checksum = 0;  // the payload may have changed; 0 = none (IPv4)
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
    state start {
        pkt.extract(eg_md);
        meta.is_atp = 0;
        transition parse_ethernet;
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
