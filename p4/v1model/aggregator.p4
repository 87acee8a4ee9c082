// The aggregator pool's metadata registers (engines::AggregatorRegisters): one register array
// per field, each read, updated and written once per packet, returning one value to meta.
// BMv2 runs a packet through the whole pipeline before the next, so read-modify-write here
// is as atomic as a Tofino RegisterAction.
#ifndef ATP_V1MODEL_AGGREGATOR_P4
#define ATP_V1MODEL_AGGREGATOR_P4

#include "../common/headers.p4"
#include "values.p4"

control AggregatorStages(inout headers_t hdr, inout atp_meta_t meta) {
    register<bit<32>>(ATP_POOL) owner_seq;    // the pair's lo: seq ^ the job's token
    register<bit<32>>(ATP_POOL) owner_epoch;  // the pair's hi: claim epoch, 0 = free
    register<bit<32>>(ATP_POOL) owner_id;     // job[14:0] << 16 | run
    register<bit<16>>(ATP_POOL) value_count;
    register<bit<32>>(ATP_POOL) bitmap;
    register<bit<8>>(ATP_POOL) count;
    register<bit<1>>(ATP_POOL) ecn;
    register<bit<1>>(ATP_POOL) wrapped;

    // owner_seq.claim_or_match: two conditions, as one Tofino 1 stateful ALU decides.
    action owner_seq_claim_or_match() {
        bit<32> seq;
        bit<32> epoch;
        owner_seq.read(seq, meta.index);
        owner_epoch.read(epoch, meta.index);
        if (epoch <= meta.expired_at_or_before) {
            meta.owner = epoch == 0 ? SEQ_CLAIMED : SEQ_TAKEN_OVER;
            seq = meta.keyed_seq;
            epoch = meta.claim_epoch;
        } else {
            meta.owner = seq == meta.keyed_seq ? SEQ_SAME : SEQ_OTHER;
        }
        owner_seq.write(meta.index, seq);
        owner_epoch.write(meta.index, epoch);
    }

    // owner_seq.match_and_free: frees what holds the packet's keyed seq, which only a packet with
    // the owner's token names (the identity stage is next).
    action owner_seq_match_and_free() {
        bit<32> seq;
        bit<32> epoch;
        owner_seq.read(seq, meta.index);
        owner_epoch.read(epoch, meta.index);
        bool mine = epoch != 0 && seq == meta.keyed_seq;
        meta.owner = mine ? SEQ_SAME : SEQ_OTHER;
        owner_epoch.write(meta.index, mine ? 32w0 : epoch);
    }

    action owner_id_write() { owner_id.write(meta.index, meta.owner_id); }

    // owner_id.matches: a seq match of another job or run is not ours.
    action owner_id_matches() {
        bit<32> id;
        owner_id.read(id, meta.index);
        if (id != meta.owner_id) { meta.owner = SEQ_OTHER; }
    }

    action value_count_matches() {
        bit<16> n;
        value_count.read(n, meta.index);
        if (meta.claiming == 1) { n = hdr.atp.value_count; }
        value_count.write(meta.index, n);
        meta.size_ok = n == hdr.atp.value_count ? 1w1 : 1w0;
    }

    action bitmap_before() {
        bit<32> b;
        bitmap.read(b, meta.index);
        meta.bitmap_before = meta.update == UPDATE_START ? 32w0 : b;
        if (meta.update == UPDATE_START) { b = meta.contributor; }
        if (meta.update == UPDATE_ADD) { b = b | meta.contributor; }
        bitmap.write(meta.index, b);
    }

    action count_after() {
        bit<8> n;
        count.read(n, meta.index);
        if (meta.update == UPDATE_START) { n = 1; }
        if (meta.update == UPDATE_ADD) { n = n + 1; }
        count.write(meta.index, n);
        meta.count_after = n;
    }

    action ecn_after() {
        bit<1> e;
        bit<1> packet_ecn = (hdr.atp.flags & FLAG_ECN) != 0 ? 1w1 : 1w0;
        ecn.read(e, meta.index);
        if (meta.update == UPDATE_START) { e = packet_ecn; }
        if (meta.update == UPDATE_ADD) { e = e | packet_ecn; }
        ecn.write(meta.index, e);
        meta.ecn_after = e;
    }

    // After the value stages: `overflow` is known.
    action wrapped_after() {
        bit<1> w;
        bit<1> packet_wrapped = (hdr.atp.flags & FLAG_WRAPPED) != 0 ? 1w1 : 1w0;
        wrapped.read(w, meta.index);
        if (meta.update == UPDATE_START) { w = packet_wrapped; }
        if (meta.update == UPDATE_ADD) { w = w | packet_wrapped | meta.overflow; }
        wrapped.write(meta.index, w);
        meta.wrapped_after = w;
    }

    ValueLanes() lanes;

    apply {
        if (hdr.pass.isValid()) {
            // A later pass: the lanes of its values, and a sum that wrapped in one of them
            // (what wrapped_after and the rewrite did for the first pass's lanes). In the last,
            // a complete rack sum's aggregator is freed.
            meta.overflow = 0;
            lanes.apply(hdr, meta);
            if (meta.release == 1 && hdr.atp.value_count <= meta.pass_end) {
                meta.keyed_seq = hdr.atp.seq ^ hdr.atp.token;
                owner_seq_match_and_free();
            }
            if (meta.overflow == 1) {
                if (meta.update == UPDATE_ADD) { wrapped.write(meta.index, 1); }
                if (meta.next_step == STEP_EMIT_SUM || meta.next_step == STEP_FLUSH_UP) {
                    hdr.atp.flags = hdr.atp.flags | FLAG_WRAPPED;
                }
            }
            return;
        }
        meta.lane_update = UPDATE_NONE;
        meta.release = 0;
        meta.owner = SEQ_OTHER;
        meta.claiming = 0;
        meta.size_ok = 1;
        meta.update = UPDATE_NONE;
        meta.duplicate = 0;
        meta.absent = 0;
        meta.overflow = 0;
        meta.bitmap_before = 0;
        meta.count_after = 0;
        meta.ecn_after = 0;
        meta.wrapped_after = 0;
        if (meta.packet_class == CLASS_AGGREGATE) {
            owner_seq_claim_or_match();
            if (meta.owner != SEQ_OTHER) {
                meta.claiming = meta.owner == SEQ_SAME ? 1w0 : 1w1;
                if (meta.claiming == 1) { owner_id_write(); } else { owner_id_matches(); }
            }
            if (meta.owner != SEQ_OTHER) {
                value_count_matches();
                if (meta.size_ok == 0) { meta.owner = SEQ_OTHER; }
                if (meta.size_ok == 1) {
                    meta.update = meta.claiming == 1 ? UPDATE_START : UPDATE_ADD;
                    bitmap_before();
                    meta.duplicate = (meta.bitmap_before & meta.contributor) != 0 ? 1w1 : 1w0;
                    if (meta.claiming == 0 && meta.duplicate == 1) { meta.update = UPDATE_READ; }
                    count_after();
                    ecn_after();
                    lanes.apply(hdr, meta);
                    wrapped_after();
                    // Complete below a level 2, which holds the sum from here on: the owner
                    // stage, before this one, frees the aggregator in the packet's last pass
                    // (SwitchPipeline::aggregate).
                    if (meta.duplicate == 0 && meta.count_after >= meta.fan_in &&
                        meta.level_after == LEVEL_SPINE) {
                        meta.release = 1;
                    }
                }
            }
        } else if (meta.packet_class == CLASS_FLUSH) {
            // A resend frees the aggregator it names and carries its partial sum up.
            owner_seq_match_and_free();
            if (meta.owner == SEQ_SAME) { owner_id_matches(); }
            if (meta.owner == SEQ_SAME) {
                value_count_matches();
                if (meta.size_ok == 0) { meta.owner = SEQ_OTHER; }
                if (meta.size_ok == 1) {
                    meta.update = UPDATE_READ;
                    bitmap_before();
                    meta.absent = (meta.bitmap_before & meta.contributor) == 0 ? 1w1 : 1w0;
                    count_after();
                    ecn_after();
                    if ((hdr.atp.flags & FLAG_ECN) != 0) { meta.ecn_after = 1; }
                    meta.update = meta.absent == 1 ? UPDATE_INTO_PACKET : UPDATE_READ;
                    lanes.apply(hdr, meta);
                    meta.update = UPDATE_READ;
                    wrapped_after();
                    if (meta.absent == 1 && ((hdr.atp.flags & FLAG_WRAPPED) != 0 ||
                                             meta.overflow == 1)) {
                        meta.wrapped_after = 1;
                    }
                }
            }
        } else if (meta.packet_class == CLASS_RESULT && meta.has_index == 1) {
            owner_seq_match_and_free();  // a result or float request frees what it names
            if (meta.owner == SEQ_SAME) { owner_id_matches(); }
        }
        // What the next step reads: contributions missing, the flags from the sticky bits.
        meta.missing = meta.fan_in |-| meta.count_after;
        meta.flags_after = 0;
        if (meta.ecn_after == 1) { meta.flags_after = FLAG_ECN; }
        if (meta.wrapped_after == 1) { meta.flags_after = meta.flags_after | FLAG_WRAPPED; }
    }
}

#endif
