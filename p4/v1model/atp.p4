// ATP's switch pipeline for BMv2 simple_switch (v1model): the same stages as the C++ pipeline
// (src/engines/switch/switch_pipeline.h) and the TNA program, with its passes (constants.p4).
// docs/p4.md maps every C++ stage to its control here. Build:
//   p4c-bm2-ss --arch v1model -o atp.json p4/v1model/atp.p4
#include <core.p4>
#include <v1model.p4>

#include "lanes.p4"  // ATP_LANES, the values per packet
#define ATP_POOL 4096   // aggregators (the control plane sets a power of two up to this)
// meta.release in the pass header: a complete rack sum's aggregator, freed in the last pass.
#define ATP_PASS_TARGET_FIELDS bit<8> release;

#include "../common/headers.p4"
#include "../common/parser.p4"
#include "../common/validate.p4"
#include "../common/job_table.p4"
#include "../common/classify.p4"
#include "../common/next_step.p4"
#include "../common/next_hop.p4"
#include "aggregator.p4"

// simple_switch's instance_type of a recirculated packet (standard_metadata), and the port
// every packet that goes round leaves ingress for: one egress queue keeps the passes of all
// packets in the order their first passes ran (another pass's lanes read what earlier ones
// wrote). No interface sits behind it: egress recirculates instead of sending.
const bit<32> BMV2_INSTANCE_TYPE_RECIRC = 4;
const bit<9> BMV2_RECIRCULATION_PORT = 509;

parser AtpV1Parser(packet_in pkt, out headers_t hdr, inout atp_meta_t meta,
                   inout standard_metadata_t sm) {
    AtpHeadersParser() headers_parser;
    state start {
        transition select(sm.instance_type) {
            BMV2_INSTANCE_TYPE_RECIRC : parse_pass;
            default : parse_headers;
        }
    }
    // A later pass: the first pass's decision in front of the packet.
    state parse_pass {
        pkt.extract(hdr.pass);
        transition parse_headers;
    }
    state parse_headers {
        headers_parser.apply(pkt, hdr, meta);
        transition select(meta.is_atp) {
            1 : values_start;
            default : accept;
        }
    }
    state values_start {
        meta.values_left = hdr.atp.value_count;
        meta.lanes_left = ATP_LANES;
        transition select(hdr.atp.value_count) {
            0 : accept;
            default : parse_value;
        }
    }
    // One value per loop; beyond ATP_LANES values the rest stays payload (such a packet is
    // never aggregated: K <= ATP_LANES).
    state parse_value {
        pkt.extract(hdr.values.next);
        meta.values_left = meta.values_left - 1;
        meta.lanes_left = meta.lanes_left - 1;
        transition select(meta.values_left, meta.lanes_left) {
            (0, _) : accept;
            (_, 0) : accept;
            default : parse_value;
        }
    }
}

control AtpVerifyChecksum(inout headers_t hdr, inout atp_meta_t meta) {
    apply {}
}

control AtpIngress(inout headers_t hdr, inout atp_meta_t meta, inout standard_metadata_t sm) {
    ValidateAtp() validate;
    JobTable() job_table;
    Classify() classify;
    AggregatorStages() aggregator;
    NextStep() next_step;
    // The claim clock (engines::ClaimClock): the control plane writes the epoch, counted from
    // 2, every stale_after / 2. Never written (0) reads as 2: nothing is ever taken over.
    register<bit<32>>(1) claim_epoch;
    // The members heard from (constants.p4): the control plane adds a member below to the
    // job's multicast group once its slot is set.
    register<bit<8>>(ATP_MEMBER_SLOTS) heard;
    // Packets per next step: the counters' one place.
    counter(STEPS, CounterType.packets) next_steps;
    // Passes after the first (recirculations): the harness checks each packet's against the
    // C++ pipeline's verdict (engines::passes_for).
    counter(1, CounterType.packets) recirculations;

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
    }

    // Everything that is not ATP: plain IPv4 forwarding.
    action ipv4_forward(bit<9> port, bit<48> dst_mac) {
        sm.egress_spec = port;
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action drop() { mark_to_drop(sm); }
    table ipv4_routes {
        key = { hdr.ipv4.dst : lpm; }
        actions = { ipv4_forward; drop; }
        default_action = drop();
        size = 1024;
    }

    // The first pass's lanes take values [0, ATP_FIRST_PASS_VALUES), each later pass the next
    // ATP_LATER_PASS_VALUES (constants.p4).
    action take_first_pass_decision() {
        meta.update = hdr.pass.update;
        meta.index = hdr.pass.index;
        meta.next_step = hdr.pass.next_step;
        meta.up_port = (bit<9>)hdr.pass.up_port;
        meta.answer_port = (bit<9>)hdr.pass.answer_port;
        meta.group = hdr.pass.group;
        meta.release = hdr.pass.release[0:0];
        meta.pass_first = ATP_FIRST_PASS_VALUES +
                          ((bit<16>)hdr.pass.pass - 1) * ATP_LATER_PASS_VALUES;
        meta.pass_end = meta.pass_first + ATP_LATER_PASS_VALUES;
    }
    // Another pass: the decision goes in front of the packet, which egress sends round.
    action go_round(bit<8> next_pass) {
        hdr.pass.setValid();
        hdr.pass.pass = next_pass;
        hdr.pass.update = meta.lane_update;
        hdr.pass.index = meta.index;
        hdr.pass.next_step = meta.next_step;
        hdr.pass.up_port = (bit<16>)meta.up_port;
        hdr.pass.answer_port = (bit<16>)meta.answer_port;
        hdr.pass.group = meta.group;
        hdr.pass.release = 7w0 ++ meta.release;
        meta.go_round = 1;
        sm.egress_spec = BMV2_RECIRCULATION_PORT;
    }

    apply {
        meta.go_round = 0;
        if (hdr.pass.isValid()) {
            recirculations.count(0);
            take_first_pass_decision();
            aggregator.apply(hdr, meta);
        } else if (meta.is_atp == 0) {
            if (hdr.ipv4.isValid()) { ipv4_routes.apply(); } else { drop(); }
            return;
        } else {
            profile.apply();
            validate.apply(hdr, meta);
            if (sm.parser_error != error.NoError) { meta.bad_parse = 1; }
            job_table.apply(hdr, meta, sm.ingress_port);
            classify.apply(hdr, meta);
            // A member below is heard once the job's packet from it passed the checks.
            if (meta.packet_class != CLASS_NONE && meta.downward == 0) {
                heard.write((bit<32>)meta.member_slot, 1);
            }
            meta.owner_id = 1w0 ++ hdr.atp.job[14:0] ++ hdr.atp.tensor[31:16];
            claim_epoch.read(meta.claim_epoch, 0);
            if (meta.claim_epoch < 2) { meta.claim_epoch = 2; }
            meta.expired_at_or_before = meta.claim_epoch - 2;
            meta.pass_first = 0;
            meta.pass_end = ATP_FIRST_PASS_VALUES;
            aggregator.apply(hdr, meta);
            next_step.apply(hdr, meta);
            next_steps.count((bit<32>)meta.next_step);
        }
        // Round again for the values left, or once for a release the first pass cannot make.
        if ((meta.lane_update != UPDATE_NONE && hdr.atp.value_count > meta.pass_end) ||
            (meta.release == 1 && !hdr.pass.isValid())) {
            bit<8> pass = hdr.pass.isValid() ? hdr.pass.pass : 8w0;
            go_round(pass + 1);
            return;
        }
        hdr.pass.setInvalid();
        bit<8> s = meta.next_step;
        if (s == STEP_PASS_UP || s == STEP_COLLIDE_UP || s == STEP_FLUSH_UP ||
            s == STEP_JOIN_UP || s == STEP_EMIT_SUM) {
            sm.egress_spec = meta.up_port;
        } else if (s == STEP_MULTICAST_DOWN) {
            sm.mcast_grp = meta.group;
        } else if (s == STEP_ANSWER_DOWN) {
            sm.egress_spec = meta.answer_port;
        } else {
            drop();
        }
        hdr.udp.checksum = 0;  // the payload may have changed; 0 = none (IPv4)
    }
}

// ECN is an egress fact: a fragment leaving through a queue deeper than the threshold is
// marked. `ecn_mark_all` marks every fragment (how a trace's `congested` is replayed). Then
// the next hop's address (next_hop.p4).
control AtpEgress(inout headers_t hdr, inout atp_meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(1) ecn_threshold;  // packets queued; 0: never
    register<bit<1>>(1) ecn_mark_all;
    NextHop() next_hop;
    apply {
        if (meta.go_round == 1) {  // another pass, through ingress again: nothing leaves
            recirculate_preserving_field_list(0);
            return;
        }
        if (hdr.atp.isValid() && hdr.atp.kind == KIND_FRAGMENT) {
            bit<32> threshold;
            bit<1> all;
            ecn_threshold.read(threshold, 0);
            ecn_mark_all.read(all, 0);
            if (all == 1 || (threshold != 0 && (bit<32>)sm.deq_qdepth >= threshold)) {
                hdr.atp.flags = hdr.atp.flags | FLAG_ECN;
            }
        }
        next_hop.apply(hdr, sm.egress_port);
    }
}

control AtpComputeChecksum(inout headers_t hdr, inout atp_meta_t meta) {
    apply {
        // Plain forwarding changed the ttl, the next hop the addresses of ATP packets.
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control AtpDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.pass);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.atp);
        pkt.emit(hdr.values);
    }
}

V1Switch(AtpV1Parser(), AtpVerifyChecksum(), AtpIngress(), AtpEgress(), AtpComputeChecksum(),
         AtpDeparser()) main;
