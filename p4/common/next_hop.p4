// The next hop's address, in egress. ATP nodes address each other hop by hop: a worker sends to
// its rack switch's address, a switch to the next switch or the job's PS, a result to each
// worker's own address (docs/configuration.md). The software switch sends from its socket; a
// P4 switch rewrites the Ethernet, IPv4 and UDP addresses of each ATP packet it sends, per
// (job, egress port): that pair names one node, since a job has at most one member behind a
// port (`atp p4 config` refuses wiring where it would not). Multicast replicas get their
// worker's address the same way, by the port each replica leaves from.
//
// Without entries (the conformance harness's traces) nothing is rewritten.
#ifndef ATP_NEXT_HOP_P4
#define ATP_NEXT_HOP_P4

#include "headers.p4"

control NextHop(inout headers_t hdr, in bit<9> egress_port) {
    action rewrite(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                   bit<16> dst_port) {
        hdr.ethernet.src = src_mac;
        hdr.ethernet.dst = dst_mac;
        hdr.ipv4.src = src_ip;
        hdr.ipv4.dst = dst_ip;
        hdr.udp.src_port = ATP_UDP_PORT;
        hdr.udp.dst_port = dst_port;
    }
    table next_hop {
        key = {
            hdr.atp.job : exact;
            egress_port : exact;
        }
        actions = { rewrite; NoAction; }
        default_action = NoAction();
        size = 16384;
    }
    apply {
        if (hdr.atp.isValid()) { next_hop.apply(); }
    }
}

#endif
