// The aggregator pool's metadata registers (engines::AggregatorRegisters): one register array
// per field, each read, updated and written once per packet, returning one value to meta.
// BMv2 runs a packet through the whole pipeline before the next, so read-modify-write here
// is as atomic as a Tofino RegisterAction.
#ifndef ATP_V1MODEL_AGGREGATOR_P4
#define ATP_V1MODEL_AGGREGATOR_P4

#include "../common/headers.p4"
#include "values.p4"

control AggregatorStages(inout headers_t hdr, inout atp_meta_t meta) {
    register<bit<32>>(ATP_POOL) owner_hi;    // valid | job[14:0] | run
    register<bit<32>>(ATP_POOL) owner_lo;    // seq
    register<bit<32>>(ATP_POOL) claimed_at;  // 65.536 us units
    register<bit<16>>(ATP_POOL) value_count;
    register<bit<32>>(ATP_POOL) bitmap;
    register<bit<8>>(ATP_POOL) count;
    register<bit<1>>(ATP_POOL) ecn;
    register<bit<1>>(ATP_POOL) wrapped;

    // owner.claim_or_match
    action owner_claim_or_match() {
        bit<32> hi;
        bit<32> lo;
        owner_hi.read(hi, meta.index);
        owner_lo.read(lo, meta.index);
        int<32> distance = (int<32>)(hdr.atp.seq - lo);
        if (hi[31:31] == 0) {
            meta.owner = OWNER_CLAIMED;
        } else if (hi == meta.tag_hi && lo == hdr.atp.seq) {
            meta.owner = OWNER_SAME;
        } else if (hi == meta.tag_hi) {
            // the job sending seq + window proves seq finished
            meta.owner = distance >= (int<32>)meta.window ? OWNER_RECLAIMED : OWNER_OTHER;
        } else if (hi[30:16] == meta.tag_hi[30:16]) {
            meta.owner = OWNER_RECLAIMED;  // another run of the job gives way
        } else {
            meta.owner = OWNER_OTHER;
        }
        // BMv2 actions call externs unconditionally: write back what is to stay.
        bool claim = meta.owner == OWNER_CLAIMED || meta.owner == OWNER_RECLAIMED;
        owner_hi.write(meta.index, claim ? meta.tag_hi : hi);
        owner_lo.write(meta.index, claim ? hdr.atp.seq : lo);
    }

    // owner.match_and_free
    action owner_match_and_free() {
        bit<32> hi;
        bit<32> lo;
        owner_hi.read(hi, meta.index);
        owner_lo.read(lo, meta.index);
        bool mine = hi == meta.tag_hi && lo == hdr.atp.seq;
        meta.owner = mine ? OWNER_SAME : OWNER_OTHER;
        owner_hi.write(meta.index, mine ? 32w0 : hi);
        owner_lo.write(meta.index, mine ? 32w0 : lo);
    }

    // claimed_at.expired: a claim stamps; a join of a claim stale_units old restamps.
    action claimed_at_expired() {
        bit<32> stamp;
        claimed_at.read(stamp, meta.index);
        meta.expired = (meta.claiming == 0 && meta.now_units - stamp >= meta.stale_units)
                       ? 1w1 : 1w0;
        claimed_at.write(meta.index,
                         (meta.claiming == 1 || meta.expired == 1) ? meta.now_units : stamp);
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
        meta.owner = OWNER_OTHER;
        meta.claiming = 0;
        meta.expired = 0;
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
            owner_claim_or_match();
            if (meta.owner != OWNER_OTHER) {
                meta.claiming = meta.owner == OWNER_SAME ? 1w0 : 1w1;
                claimed_at_expired();
                meta.claiming = meta.claiming | meta.expired;
                value_count_matches();
                if (meta.size_ok == 1) {
                    meta.update = meta.claiming == 1 ? UPDATE_START : UPDATE_ADD;
                    bitmap_before();
                    meta.duplicate = (meta.bitmap_before & meta.contributor) != 0 ? 1w1 : 1w0;
                    if (meta.claiming == 0 && meta.duplicate == 1) { meta.update = UPDATE_READ; }
                    count_after();
                    ecn_after();
                    lanes.apply(hdr, meta);
                    wrapped_after();
                }
            }
        } else if (meta.packet_class == CLASS_FLUSH) {
            // A resend frees the aggregator it names and carries its partial sum up.
            owner_match_and_free();
            if (meta.owner == OWNER_SAME) {
                value_count_matches();
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
            owner_match_and_free();  // a result or float request frees what it names
        }
    }
}

#endif
