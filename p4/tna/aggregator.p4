// The aggregator pool's metadata registers on Tofino (engines::AggregatorRegisters): one
// Register per field, one RegisterAction per C++ action. Each RegisterAction is what one
// Tofino 1 stateful ALU can do: at most two conditions, one 32-bit output, two PHV inputs.
#ifndef ATP_TNA_AGGREGATOR_P4
#define ATP_TNA_AGGREGATOR_P4

#include "../common/headers.p4"
#include "values.p4"

// A stateful ALU's predicate output: which of its two conditions held.
const bit<8> PREDICATE_LO = 2;    // cmplo only
const bit<8> PREDICATE_HI = 4;    // cmphi only
const bit<8> PREDICATE_BOTH = 8;

// seen_stage's entries: bit i in both the bitmap and the contributor.
#define ATP_SEEN_ENTRY(i) (32w1 << i &&& 32w1 << i, 32w1 << i &&& 32w1 << i) : seen();
#define ATP_FOR_EACH_CONTRIBUTOR_BIT(X) \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) \
    X(30) X(31)

struct owner_seq_t {
    bit<32> lo;  // seq ^ the job's token (meta.keyed_seq, OwnerTag in the C++ model)
    bit<32> hi;  // the claim epoch, 0 = free
}

control AggregatorStages(inout headers_t hdr, inout atp_meta_t meta) {
    Register<owner_seq_t, bit<32>>(ATP_POOL) owner_seq;
    Register<bit<32>, bit<32>>(ATP_POOL) owner_id;
    Register<bit<16>, bit<32>>(ATP_POOL) value_count;
    Register<bit<32>, bit<32>>(ATP_POOL) bitmap;
    // count holds the contributions still missing (fan_in - count, which the C++ model keeps
    // as count): the next step then needs no subtraction. ecn and wrapped share one byte of
    // FLAG_ECN | FLAG_WRAPPED bits, one stateful ALU for both sticky flags.
    Register<bit<8>, bit<32>>(ATP_POOL) missing;
    Register<bit<8>, bit<32>>(ATP_POOL) sticky_flags;

    // owner_seq.claim_or_match. Conditions: claimable (free or expired; cmplo) and keyed seq
    // equal (cmphi). The new epoch is expired_at_or_before + 2, so the ALU reads two PHV words
    // (the keyed seq and that bound). It returns the 4-bit predicate: 1 << (cmplo + 2 cmphi).
    RegisterAction<owner_seq_t, bit<32>, bit<8>>(owner_seq) seq_claim_or_match = {
        void apply(inout owner_seq_t v, out bit<8> predicate) {
            predicate = this.predicate(v.hi <= meta.expired_at_or_before, v.lo == meta.keyed_seq);
            if (v.hi <= meta.expired_at_or_before) {
                v.lo = meta.keyed_seq;
                v.hi = meta.expired_at_or_before + 2;
            }
        }
    };
    // owner_seq.match_and_free: frees what holds the packet's keyed seq, which only a packet with
    // the owner's token names; owner_id then says if it was this run's.
    RegisterAction<owner_seq_t, bit<32>, bit<8>>(owner_seq) seq_match_and_free = {
        void apply(inout owner_seq_t v, out bit<8> predicate) {
            predicate = this.predicate(v.lo == meta.keyed_seq, v.hi != 0);
            if (v.lo == meta.keyed_seq && v.hi != 0) { v.hi = 0; }
        }
    };

    RegisterAction<bit<32>, bit<32>, bit<8>>(owner_id) id_write = {
        void apply(inout bit<32> v) { v = meta.owner_id; }
    };
    RegisterAction<bit<32>, bit<32>, bit<8>>(owner_id) id_matches = {
        void apply(inout bit<32> v, out bit<8> same) {
            if (v == meta.owner_id) { same = 1; }
        }
    };

    RegisterAction<bit<16>, bit<32>, bit<8>>(value_count) size_write = {
        void apply(inout bit<16> v) { v = hdr.atp.value_count; }
    };
    RegisterAction<bit<16>, bit<32>, bit<8>>(value_count) size_matches = {
        void apply(inout bit<16> v, out bit<8> same) {
            if (v == hdr.atp.value_count) { same = 1; }
        }
    };

    // bitmap: the bitmap before this packet (start: 0).
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_start = {
        void apply(inout bit<32> v) { v = meta.contributor; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_add = {
        void apply(inout bit<32> v, out bit<32> before) { before = v; v = v | meta.contributor; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(bitmap) bitmap_read = {
        void apply(inout bit<32> v, out bit<32> before) { before = v; }
    };

    RegisterAction<bit<8>, bit<32>, bit<8>>(missing) missing_start = {
        void apply(inout bit<8> v, out bit<8> after) { v = meta.fan_in_less_one; after = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(missing) missing_add = {
        void apply(inout bit<8> v, out bit<8> after) { v = v |-| 1; after = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(missing) missing_read = {
        void apply(inout bit<8> v, out bit<8> after) { after = v; }
    };

    // The sum's flags: the packet's on a claim, ORed in on a join; a flush adds the packet's
    // ecn, and its wrapped too if its contribution is absent from the aggregator.
    RegisterAction<bit<8>, bit<32>, bit<8>>(sticky_flags) sticky_start = {
        void apply(inout bit<8> v, out bit<8> after) { v = meta.packet_sticky; after = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(sticky_flags) sticky_add = {
        void apply(inout bit<8> v, out bit<8> after) { v = v | meta.packet_sticky; after = v; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(sticky_flags) sticky_flush_absent = {
        void apply(inout bit<8> v, out bit<8> after) { after = v | meta.packet_sticky; }
    };
    // A duplicate's sum and a flush whose contribution is there already: the register and the
    // packet's ecn (which a re-sent sum keeps from its header anyway).
    RegisterAction<bit<8>, bit<32>, bit<8>>(sticky_flags) sticky_or_ecn = {
        void apply(inout bit<8> v, out bit<8> after) { after = v | meta.packet_ecn; }
    };

    // Each stage is a table whose key is what the stages before it found, and whose actions
    // run one RegisterAction each. The owner_seq predicate: CLAIMABLE (free or expired) or
    // CLAIMABLE_SAME_SEQ claim; SAME_SEQ joins (if owner_id agrees); for a flush or result,
    // BOTH means it held this seq and is now free.
    action seq_claim() { meta.seq_predicate = seq_claim_or_match.execute(meta.index); }
    action seq_free() { meta.seq_predicate = seq_match_and_free.execute(meta.index); }
    table owner_seq_stage {
        key = { meta.packet_class : exact; meta.has_index : exact; }
        actions = { seq_claim; seq_free; NoAction; }
        const default_action = NoAction();
        const entries = {
            (CLASS_AGGREGATE, 1) : seq_claim();
            (CLASS_FLUSH, 1) : seq_free();
            (CLASS_RESULT, 1) : seq_free();
        }
        size = 4;
    }

    action id_claim() { id_write.execute(meta.index); meta.id_ok = 1; }
    action id_check() { meta.id_ok = id_matches.execute(meta.index); }
    table owner_id_stage {
        key = { meta.packet_class : ternary; meta.seq_predicate : exact; }
        actions = { id_claim; id_check; NoAction; }
        const default_action = NoAction();
        const entries = {
            (CLASS_AGGREGATE, PREDICATE_LO) : id_claim();
            (CLASS_AGGREGATE, PREDICATE_BOTH) : id_claim();
            (CLASS_AGGREGATE, PREDICATE_HI) : id_check();
            (_, PREDICATE_BOTH) : id_check();  // a flush or result that freed its seq
        }
        size = 4;
    }

    action size_claim() { size_write.execute(meta.index); meta.size_byte = 1; }
    action size_check() { meta.size_byte = size_matches.execute(meta.index); }
    table value_count_stage {
        key = { meta.packet_class : exact; meta.seq_predicate : exact; }
        actions = { size_claim; size_check; NoAction; }
        const default_action = NoAction();
        const entries = {
            (CLASS_AGGREGATE, PREDICATE_LO) : size_claim();
            (CLASS_AGGREGATE, PREDICATE_BOTH) : size_claim();
            (CLASS_AGGREGATE, PREDICATE_HI) : size_check();
            (CLASS_FLUSH, PREDICATE_BOTH) : size_check();
        }
        size = 4;
    }

    // The bitmap stage also names the phase the rest follows: start, join or flush.
    action start() {
        bitmap_start.execute(meta.index);
        meta.bitmap_before = 0;
        meta.phase = PHASE_START;
        meta.owner = SEQ_CLAIMED;
    }
    action join() {
        meta.bitmap_before = bitmap_add.execute(meta.index);
        meta.phase = PHASE_JOIN;
        meta.owner = SEQ_SAME;
    }
    action flush() {
        meta.bitmap_before = bitmap_read.execute(meta.index);
        meta.phase = PHASE_FLUSH;
        meta.owner = SEQ_SAME;
    }
    table bitmap_stage {
        key = {
            meta.packet_class : exact;
            meta.seq_predicate : exact;
            meta.id_ok : exact;
            meta.size_byte : exact;
        }
        actions = { start; join; flush; NoAction; }
        const default_action = NoAction();
        const entries = {
            (CLASS_AGGREGATE, PREDICATE_LO, 1, 1) : start();
            (CLASS_AGGREGATE, PREDICATE_BOTH, 1, 1) : start();
            (CLASS_AGGREGATE, PREDICATE_HI, 1, 1) : join();
            (CLASS_FLUSH, PREDICATE_BOTH, 1, 1) : flush();
        }
        size = 4;
    }

    // Whether the aggregator holds the packet's contributor already: one entry per bit.
    action seen() { meta.seen = 1; }
    table seen_stage {
        key = { meta.bitmap_before : ternary; meta.contributor : ternary; }
        actions = { seen; NoAction; }
        const default_action = NoAction();
        const entries = {
            ATP_FOR_EACH_CONTRIBUTOR_BIT(ATP_SEEN_ENTRY)
        }
        size = 32;
    }

    action count_start() { meta.missing = missing_start.execute(meta.index); }
    action count_add() { meta.missing = missing_add.execute(meta.index); }
    action count_read() { meta.missing = missing_read.execute(meta.index); }
    table missing_stage {
        key = { meta.phase : exact; meta.seen : exact; }
        actions = { count_start; count_add; count_read; NoAction; }
        const default_action = NoAction();
        const entries = {
            (PHASE_START, 0) : count_start();
            (PHASE_JOIN, 0) : count_add();
            (PHASE_JOIN, 1) : count_read();
            (PHASE_FLUSH, 0) : count_read();
            (PHASE_FLUSH, 1) : count_read();
        }
        size = 8;
    }

    action flags_start() { meta.flags_after = sticky_start.execute(meta.index); }
    action flags_add() { meta.flags_after = sticky_add.execute(meta.index); }
    action flags_with_ecn() { meta.flags_after = sticky_or_ecn.execute(meta.index); }
    action flags_flush_absent() { meta.flags_after = sticky_flush_absent.execute(meta.index); }
    table sticky_stage {
        key = { meta.phase : exact; meta.seen : exact; }
        actions = { flags_start; flags_add; flags_with_ecn; flags_flush_absent; NoAction; }
        const default_action = NoAction();
        const entries = {
            (PHASE_START, 0) : flags_start();
            (PHASE_JOIN, 0) : flags_add();
            (PHASE_JOIN, 1) : flags_with_ecn();
            (PHASE_FLUSH, 0) : flags_flush_absent();
            (PHASE_FLUSH, 1) : flags_with_ecn();
        }
        size = 8;
    }

    // What the next step reads of a join or a flush.
    action duplicate() { meta.duplicate = 1; }
    action absent() { meta.absent = 1; }
    table contribution {
        key = { meta.phase : exact; meta.seen : exact; }
        actions = { duplicate; absent; NoAction; }
        const default_action = NoAction();
        const entries = {
            (PHASE_JOIN, 1) : duplicate();
            (PHASE_FLUSH, 0) : absent();
        }
        size = 4;
    }

    apply {
        meta.seq_predicate = 0;
        meta.id_ok = 0;
        meta.size_byte = 0;
        meta.phase = PHASE_NONE;
        meta.owner = SEQ_OTHER;
        meta.seen = 0;
        meta.duplicate = 0;
        meta.absent = 0;
        meta.bitmap_before = 0;
        meta.missing = 1;
        meta.flags_after = 0;
        owner_seq_stage.apply();
        owner_id_stage.apply();
        value_count_stage.apply();
        bitmap_stage.apply();
        seen_stage.apply();
        missing_stage.apply();
        sticky_stage.apply();
        contribution.apply();
    }
}

#endif
