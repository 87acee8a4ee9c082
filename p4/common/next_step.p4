// The next-step stage (SwitchPipeline::decide's last step and ::apply): one decision from the
// metadata the stages computed, then the header rewrite it implies, each one table (a switch
// evaluates a table in one stage where a chain of ifs takes one stage each). Which port or
// group the packet leaves by is left in meta for the target's glue.
//
// The target's register stages hand over: meta.owner (SEQ_OTHER unless the packet's own
// aggregator took it), meta.missing (contributions the sum still lacks, 0 when complete),
// meta.duplicate and meta.absent, meta.bitmap_before, and meta.flags_after (the sum's or
// flush's ecn and wrapped flags).
#ifndef ATP_NEXT_STEP_P4
#define ATP_NEXT_STEP_P4

#include "headers.p4"

control NextStep(inout headers_t hdr, inout atp_meta_t meta) {
    // One ALU operation each: what the rewrites below copy.
    action derive() {
        meta.emit_keeps = hdr.atp.flags & ~(FLAG_WRAPPED | FLAG_COLLISION);
        meta.flush_keeps = hdr.atp.flags & ~(FLAG_WRAPPED | FLAG_COLLISION | FLAG_ECN);
        meta.bitmap_after = meta.bitmap_before | meta.contributor;
    }
    table derive_facts {
        actions = { derive; }
        const default_action = derive();
        size = 1;
    }

    action step(bit<8> next) { meta.next_step = next; }
    action refused() {}
    table decide {
        key = {
            meta.packet_class : ternary;
            meta.owner : ternary;
            meta.missing : ternary;
            meta.duplicate : ternary;
            meta.workers_zero : ternary;
            hdr.atp.flags : ternary;
        }
        actions = { step; refused; }
        const default_action = refused();
        const entries = {
            (CLASS_JOIN, _, _, _, _, _) : step(STEP_JOIN_UP);
            (CLASS_ANSWER, _, _, _, _, _) : step(STEP_ANSWER_DOWN);
            // a late copy for one worker (protocol.md §4): to that member alone
            (CLASS_RESULT, _, _, _, 0, FLAG_RESULT &&& FLAG_RESULT) : step(STEP_ANSWER_DOWN);
            (CLASS_RESULT, _, _, _, _, _) : step(STEP_MULTICAST_DOWN);
            (CLASS_PASS, _, _, _, _, _) : step(STEP_PASS_UP);
            (CLASS_COLLIDE, _, _, _, _, _) : step(STEP_COLLIDE_UP);
            (CLASS_FLUSH, SEQ_SAME, _, _, _, _) : step(STEP_FLUSH_UP);
            (CLASS_FLUSH, _, _, _, _, _) : step(STEP_PASS_UP);
            (CLASS_AGGREGATE, SEQ_OTHER, _, _, _, _) : step(STEP_COLLIDE_UP);
            // complete (a duplicate of a complete sum sends it again)
            (CLASS_AGGREGATE, _, 0, _, _, _) : step(STEP_EMIT_SUM);
            (CLASS_AGGREGATE, _, _, 1, _, _) : step(STEP_DROP_DUPLICATE);
            (CLASS_AGGREGATE, _, _, _, _, _) : step(STEP_ABSORB);
        }
        size = 16;
    }

    action relevel() { hdr.atp.next_level = meta.level_after; }
    action collide() { hdr.atp.flags = hdr.atp.flags | FLAG_COLLISION; }
    action collide_relevel() {
        hdr.atp.flags = hdr.atp.flags | FLAG_COLLISION;
        hdr.atp.next_level = meta.level_after;
    }
    // A sum: from this rack (level 1) or from the racks it holds (level 2).
    action emit_rack() {
        hdr.atp.racks_bitmap = meta.rack_bit;
        hdr.atp.workers_bitmap = 0;
        hdr.atp.flags = meta.emit_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action emit_racks() {
        hdr.atp.racks_bitmap = meta.bitmap_after;
        hdr.atp.workers_bitmap = 0;
        hdr.atp.flags = meta.emit_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    // A flush's contributors (SwitchPipeline::flush): the aggregator's bitmap, with the resent
    // contribution (bitmap_after) if it was absent.
    action flush_whole_rack() {  // level 1, the resent worker completes the rack
        hdr.atp.racks_bitmap = meta.rack_bit;
        hdr.atp.workers_bitmap = 0;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_workers_with_resent() {  // level 1, part of the rack
        hdr.atp.racks_bitmap = 0;
        hdr.atp.workers_bitmap = meta.bitmap_after;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_workers() {
        hdr.atp.racks_bitmap = 0;
        hdr.atp.workers_bitmap = meta.bitmap_before;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_racks_with_resent() {  // level 2, whole racks
        hdr.atp.racks_bitmap = meta.bitmap_after;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_racks() {
        hdr.atp.racks_bitmap = meta.bitmap_before;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_rack_part_with_resent() {  // level 2, part of one rack whose sum is absent
        hdr.atp.racks_bitmap = meta.bitmap_before;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    action flush_rack_part() {  // level 2, part of a rack whose sum is here: the sum alone
        hdr.atp.racks_bitmap = meta.bitmap_before;
        hdr.atp.workers_bitmap = 0;
        hdr.atp.flags = meta.flush_keeps | meta.flags_after;
        hdr.atp.next_level = meta.level_after;
    }
    table rewrite {
        key = {
            meta.next_step : exact;
            meta.level : ternary;
            meta.level_match : ternary;
            meta.absent : ternary;
            meta.missing : ternary;
            meta.workers_zero : ternary;
        }
        actions = { relevel; collide; collide_relevel; emit_rack; emit_racks; flush_whole_rack;
                    flush_workers_with_resent; flush_workers; flush_racks_with_resent; flush_racks;
                    flush_rack_part_with_resent; flush_rack_part; NoAction; }
        const default_action = NoAction();
        const entries = {
            (STEP_PASS_UP, _, 1, _, _, _) : relevel();
            (STEP_JOIN_UP, _, 1, _, _, _) : relevel();
            (STEP_COLLIDE_UP, _, 1, _, _, _) : collide_relevel();
            (STEP_COLLIDE_UP, _, _, _, _, _) : collide();
            (STEP_EMIT_SUM, LEVEL_RACK, _, _, _, _) : emit_rack();
            (STEP_EMIT_SUM, _, _, _, _, _) : emit_racks();
            // level 1: the resent worker completes the rack when it was the one missing
            (STEP_FLUSH_UP, LEVEL_RACK, _, 1, 1, _) : flush_whole_rack();
            (STEP_FLUSH_UP, LEVEL_RACK, _, 0, 0, _) : flush_whole_rack();
            (STEP_FLUSH_UP, LEVEL_RACK, _, 1, _, _) : flush_workers_with_resent();
            (STEP_FLUSH_UP, LEVEL_RACK, _, 0, _, _) : flush_workers();
            (STEP_FLUSH_UP, _, _, 1, _, 1) : flush_racks_with_resent();
            (STEP_FLUSH_UP, _, _, 0, _, 1) : flush_racks();
            (STEP_FLUSH_UP, _, _, 1, _, _) : flush_rack_part_with_resent();
            (STEP_FLUSH_UP, _, _, 0, _, _) : flush_rack_part();
        }
        size = 16;
    }

    apply {
        derive_facts.apply();
        decide.apply();
        rewrite.apply();
    }
}

#endif
