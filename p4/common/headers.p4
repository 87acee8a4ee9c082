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
    bit<16> reserved;
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
    // validation (proto::decode)
    bit<1>  malformed;
    bit<32> workers_limit;   // low_bits(rack_fan_in)
    bit<32> racks_limit;     // low_bits(job_fan_in)
    bit<32> rack_bit;        // 1 << rack
    bit<1>  workers_single;  // exactly one bit in workers_bitmap
    bit<8>  workers_index;   // its index
    bit<1>  racks_single;
    // job table
    bit<1>  job_found;
    bit<32> token;
    bit<8>  fan_in;
    bit<32> window;
    bit<32> static_first;
    bit<32> static_mask;     // slice size - 1
    bit<1>  has_slice;
    bit<16> group;
    bit<1>  member_ok;       // arrived on a port that may speak for the job this way
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
    bit<32> contributor;     // the fragment's bit at this level (or a resend's named bit)
    // register stages
    bit<32> owner_id;        // job[14:0] << 16 | run
    bit<32> claim_epoch;     // the claim clock (ClaimClock)
    bit<32> expired_at_or_before;  // claim_epoch - 2: a claim stamped then is stale_after old
    bit<8>  owner;           // SEQ_* outcome of the seq stage
    bit<1>  claiming;
    bit<8>  packet_ecn;      // the packet's ecn and wrapped flags as bytes (TNA's sticky ALUs)
    bit<8>  packet_wrapped;
    bit<8>  ecn_byte;        // what the sticky registers returned (TNA)
    bit<8>  wrapped_byte;
    bit<1>  size_ok;
    bit<8>  update;
    bit<32> bitmap_before;
    bit<1>  duplicate;
    bit<1>  absent;
    bit<8>  count_after;
    bit<1>  ecn_after;
    bit<1>  wrapped_after;
    bit<1>  overflow;
    bit<32> out_racks;
    bit<32> out_workers;
    // next step
    bit<8>  next_step;
    bit<1>  rewritten;       // the payload or header changed: UDP checksum cleared
}

#ifndef ATP_LANES
#error "define ATP_LANES (the values one pass parses) before including headers.p4"
#endif

struct headers_t {
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;
    atp_h      atp;
    atp_value_h[ATP_LANES] values;
}

#endif
