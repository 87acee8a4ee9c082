// ATP constants shared by the TNA and v1model programs. The C++ pipeline
// (src/engines/switch/) is the executable specification; names match it.
#ifndef ATP_CONSTANTS_P4
#define ATP_CONSTANTS_P4

const bit<16> ATP_ETHERTYPE_IPV4 = 0x0800;
const bit<8>  ATP_IP_PROTO_UDP   = 17;
// ATP packets are UDP datagrams to this port (proto::kDefaultUdpPort); others are plain IPv4.
const bit<16> ATP_UDP_PORT = 9999;
const bit<8>  ATP_VERSION        = 1;
const bit<16> ATP_HEADER_BYTES   = 44;
const bit<16> ATP_MAX_VALUES     = 1024;  // proto::kMaxValues

// Header flags (proto::flag).
const bit<8> FLAG_RESULT        = 0x01;
const bit<8> FLAG_RESEND        = 0x02;
const bit<8> FLAG_COLLISION     = 0x04;
const bit<8> FLAG_ECN           = 0x08;
const bit<8> FLAG_FLOAT_PAYLOAD = 0x10;  // the values are float32 (kOverflow in header.h)
const bit<8> FLAG_WRAPPED       = 0x20;
const bit<8> FLAG_FLOAT_REQUEST = 0x40;
const bit<8> FLAG_REMAP         = 0x80;

// Kinds (proto::Kind) and levels (proto::Level).
const bit<8> KIND_FRAGMENT = 0;
const bit<8> KIND_JOIN     = 1;
const bit<8> KIND_JOINED   = 2;
const bit<8> KIND_QUERY    = 3;  // a worker's result query: the PS's alone, passed up
const bit<8> LEVEL_PS    = 0;
const bit<8> LEVEL_RACK  = 1;
const bit<8> LEVEL_SPINE = 2;

// Aggregator policies (engines::Policy).
const bit<8> POLICY_ATP    = 0;
const bit<8> POLICY_STATIC = 1;
const bit<8> POLICY_NONE   = 2;

// Packet classes (SwitchPipeline::PacketClass).
const bit<8> CLASS_NONE      = 0;  // refused before classification
const bit<8> CLASS_JOIN      = 1;
const bit<8> CLASS_ANSWER    = 2;
const bit<8> CLASS_RESULT    = 3;
const bit<8> CLASS_PASS      = 4;
const bit<8> CLASS_COLLIDE   = 5;
const bit<8> CLASS_FLUSH     = 6;
const bit<8> CLASS_AGGREGATE = 7;

// Seq stage outcomes (engines::SeqOutcome), and the identity stage's verdict on a freed one.
// (The values are what a Tofino stateful ALU can return as its predicate: 0, 1, 2, 4.)
const bit<8> SEQ_OTHER      = 0;
const bit<8> SEQ_CLAIMED    = 1;
const bit<8> SEQ_SAME       = 2;
const bit<8> SEQ_TAKEN_OVER = 4;

// Register updates (engines::Update), plus the flush's add-into-packet.
const bit<8> UPDATE_START       = 0;
const bit<8> UPDATE_ADD         = 1;
const bit<8> UPDATE_READ        = 2;
const bit<8> UPDATE_INTO_PACKET = 3;
const bit<8> UPDATE_NONE        = 4;  // the value stages are skipped

// Next steps (engines::NextStep), in the same order.
const bit<8> STEP_DROP_MALFORMED   = 0;
const bit<8> STEP_DROP_UNKNOWN_JOB = 1;
const bit<8> STEP_DROP_FORGED      = 2;
const bit<8> STEP_PASS_UP          = 3;
const bit<8> STEP_COLLIDE_UP       = 4;
const bit<8> STEP_ABSORB           = 5;
const bit<8> STEP_DROP_DUPLICATE   = 6;
const bit<8> STEP_EMIT_SUM         = 7;
const bit<8> STEP_FLUSH_UP         = 8;
const bit<8> STEP_MULTICAST_DOWN   = 9;
const bit<8> STEP_JOIN_UP          = 10;
const bit<8> STEP_ANSWER_DOWN      = 11;
const bit<8> STEP_NOT_ATP          = 12;  // plain IPv4 forwarding
const bit<32> STEPS = 13;
// The passes that carry a packet's values through a switch (docs/p4.md, "Passes"). On Tofino
// the first pass decides and adds 10 values in the stateful ALUs left after the decision; a
// packet with more goes round again (recirculation) for 21 more per pass: those 10 lanes, and 11
// in the ALUs the decision leaves free in stages 4-7 (p4/tna/lanes.p4). The v1model program
// goes round at the same values, so that the traces replay every pass's rules, and the C++
// pipeline counts the passes (engines::passes_for).
#define ATP_FIRST_PASS_VALUES 10
#define ATP_LATER_PASS_VALUES 21

// Register heard: one slot per member below a switch (the members table's size), set by every
// accepted packet of the job from it; a control plane learning members reads it.
#define ATP_MEMBER_SLOTS 16384

#endif
