// Packet headers and the per-packet metadata the stages hand on, shared by both programs.
// The ATP header is docs/protocol.md §2, byte for byte.
#ifndef ATP_HEADERS_P4
#define ATP_HEADERS_P4

#include "constants.p4"

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src;
    bit<32> dst;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header atp_h {
    bit<8>  version;
    bit<8>  flags;
    bit<8>  next_level;
    bit<8>  ps_index;
    bit<32> job;
    bit<32> tensor;          // run (high 16 bits) and allreduce counter (low 16)
    bit<32> seq;
    bit<32> aggregator;
    bit<32> workers_bitmap;
    bit<32> racks_bitmap;
    bit<8>  rack_fan_in;
    bit<8>  job_fan_in;
    bit<8>  rack;
    bit<8>  kind;
    bit<16> value_count;
    bit<16> results_behind;  // results only: which earlier results the PS had sent
    bit<32> remap_index;
    bit<32> token;
}

header atp_value_h {
    bit<32> v;  // int32, big-endian (or float32 bits with FLAG_FLOAT_PAYLOAD)
}

// What the stages compute, in pipeline order (SwitchPipeline::Metadata).
struct atp_meta_t {
    // parser
    bit<1>  is_atp;
    bit<16> values_left;
    bit<16> lanes_left;
    // switch profile (control plane: one default action)
    bit<8>  level;
    bit<32> pool_mask;       // pool size - 1 (the P4 programs need a power of two)
    bit<16> max_values;      // K
    bit<8>  policy;
    // validation (proto::decode): one bit per check, then their OR
    bit<1>  bad_header;
    bit<1>  bad_version;
    bit<1>  bad_results_behind;
    bit<1>  bad_kind;
    bit<1>  bad_level;
    bit<1>  bad_value_count;
    bit<1>  bad_length;
    bit<1>  bad_handshake_worker;
    bit<1>  bad_fan_in;
    bit<1>  bad_rack;
    bit<1>  bad_workers;
    bit<1>  bad_racks;
    bit<1>  bad_no_contributor;
    bit<1>  bad_own_rack;
    bit<1>  bad_parse;       // the parser failed (set by the target's glue)
    bit<32> workers_limit;   // low_bits(rack_fan_in)
    bit<32> racks_limit;     // low_bits(job_fan_in)
    bit<32> rack_bit;        // 1 << rack
    bit<1>  workers_single;  // exactly one bit in workers_bitmap
    bit<8>  workers_index;   // its index
    bit<1>  racks_single;
    bit<8>  racks_index;     // its index
    bit<16> value_bytes;     // value_count * 4
    bit<16> payload_bytes;   // udp.length - 8 - 44: must be value_bytes
    bit<32> stray_workers;   // workers_bitmap beyond rack_fan_in
    bit<32> stray_racks;     // racks_bitmap beyond job_fan_in
    bit<32> rack_overlap;    // racks_bitmap & (1 << rack)
    bit<8>  racks_beyond;    // job_fan_in - rack, saturating: 0 when rack >= job_fan_in
    bit<32> any_bitmap;      // workers_bitmap | racks_bitmap
    bit<16> values_beyond_max;   // value_count - ATP_MAX_VALUES, saturating
    bit<16> values_beyond_pass;  // value_count - K, saturating: 0 when the switch can add it
    // job table
    bit<1>  job_found;
    bit<32> token;
    bit<8>  fan_in;
    bit<32> static_first;
    bit<32> static_mask;     // slice size - 1
    bit<1>  has_slice;
    bit<16> group;
    bit<1>  member_ok;       // arrived on a port that may speak for the job this way
    bit<16> member_slot;     // that member's slot of register heard (0: the hops up)
    bit<8>  claimed_member;  // the member an upward packet speaks for (0 for a downward one)
    bit<1>  routed;
    bit<9>  up_port;
    bit<1>  answer_ok;
    bit<9>  answer_port;
    // classify
    bit<1>  downward;
    bit<8>  packet_class;
    bit<1>  fan_in_mismatch;
    bit<1>  has_index;
    bit<32> index;
    bit<32> lane_index;      // TNA: a late lane's register, index + ATP_POOL x pass
    bit<1>  later_pass;      // TNA: a pass after the first (is_atp is 0 there: no checks)
    bit<1>  leave;           // TNA: this is the packet's last pass
    bit<9>  round_port;      // TNA: the port the first pass sends the packet round through
    bit<16> beyond_first;    // TNA: values beyond the first pass's
    bit<16> beyond_second;   // TNA: and beyond the second's
    bit<16> beyond_third;    // TNA: and beyond the third's
    bit<16> pass_first;      // v1model: the values this pass's lanes take, [first, end)
    bit<16> pass_end;
    bit<8>  lane_update;     // v1model: what the lanes did (meta.update, which a flush resets)
    bit<1>  go_round;        // v1model: another pass (recirculation) after this one
    bit<1>  release;         // v1model: a rack's sum complete below a level 2: freed in the last pass
    bit<32> contributor;     // the fragment's bit at this level (or a resend's named bit)
    bit<32> static_slot;     // seq & static_mask
    bit<32> masked_index;    // aggregator & pool_mask
    bit<32> token_diff;      // the packet's token ^ the job's
    bit<32> keyed_seq;       // seq ^ the job's token: what owner_seq.lo holds (OwnerTag)
    bit<1>  token_ok;
    bit<1>  level_match;     // next_level is this switch's level
    bit<1>  fan_in_match;    // the header's fan-in at this level is the job's
    bit<1>  racks_zero;
    bit<1>  workers_zero;
    bit<1>  values_fit;      // value_count <= K
    bit<8>  level_after;     // the level an upward packet goes to next
    bit<8>  answer_member;   // the member a run-handshake answer names
    // register stages
    bit<32> owner_id;        // job[14:0] << 16 | run
    bit<32> claim_epoch;     // the claim clock (ClaimClock)
    bit<32> expired_at_or_before;  // claim_epoch - 2: a claim stamped then is stale_after old
    bit<8>  owner;           // SEQ_* outcome of the seq stage
    bit<1>  claiming;
    // TNA's register stages: what each stage's table keys on
    bit<8>  packet_sticky;   // the packet's FLAG_ECN | FLAG_WRAPPED bits
    bit<8>  packet_ecn;      // the packet's FLAG_ECN bit
    bit<8>  fan_in_less_one;
    bit<8>  seq_predicate;   // owner_seq's predicate output
    bit<8>  id_ok;
    bit<8>  size_byte;
    bit<8>  phase;           // start, join or flush
    bit<1>  seen;            // the aggregator holds the packet's contributor
    bit<1>  size_ok;
    bit<8>  update;
    bit<32> bitmap_before;
    bit<8>  missing;         // contributions the sum still lacks: 0 when complete
    bit<32> bitmap_after;    // bitmap_before | contributor
    bit<1>  duplicate;
    bit<1>  absent;
    bit<8>  count_after;
    bit<1>  ecn_after;
    bit<1>  wrapped_after;
    bit<1>  overflow;
    bit<32> out_racks;
    bit<32> out_workers;
    // next step
    bit<8>  emit_keeps;      // the flags a sum keeps from the packet
    bit<8>  flush_keeps;     // the flags a flush keeps
    bit<8>  flags_after;     // ecn and wrapped from the sticky registers
    bit<8>  next_step;
    bit<1>  rewritten;       // the payload or header changed: UDP checksum cleared
}

#if !defined(ATP_LANES) || !defined(ATP_VALUE_HEADERS)
#error "define ATP_LANES (values per packet) and ATP_VALUE_HEADERS before including headers.p4"
#endif

// Fields a target's pass header adds (v1model: the release of a complete rack sum).
#ifndef ATP_PASS_TARGET_FIELDS
#define ATP_PASS_TARGET_FIELDS
#endif
// What a packet's first pass decided, carried in front of it through the recirculation port to
// the passes after it (both programs; constants.p4, docs/p4.md "Passes"); never on a link.
header atp_pass_h {
    bit<8>  pass;       // the pass this is: 1, 2, ...
    bit<8>  last_pass;  // TNA: the packet's last
    bit<8>  phase;      // meta.phase
    bit<8>  seen;       // meta.seen (TNA)
    bit<8>  update;     // meta.lane_update (v1model)
    bit<8>  next_step;  // meta.next_step, taken when the last pass leaves
    bit<32> index;      // meta.index
    bit<32> late_index;   // TNA: this pass's row of the late lanes, index + ATP_POOL x pass
    bit<32> early_index;  // TNA: the early lanes', index + ATP_POOL x (pass - 1)
    bit<16> up_port;
    bit<16> answer_port;
    bit<16> group;
    ATP_PASS_TARGET_FIELDS
}

struct headers_t {
    atp_pass_h pass;
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;
    atp_h      atp;
    ATP_VALUE_HEADERS
}

#endif
