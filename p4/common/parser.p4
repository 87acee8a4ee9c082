// Ethernet / IPv4 / UDP to ATP's port, then the 44-byte ATP header. The values follow; each
// target parses them its own way (v1model: a loop; TNA: a parser counter), so the states up to
// the ATP header are a macro both parsers expand, continuing at their own `after_atp` state.
#ifndef ATP_PARSER_P4
#define ATP_PARSER_P4

#include "headers.p4"

// Expects `pkt`, `hdr` (headers_t) and `meta` (atp_meta_t, is_atp cleared before).
#define ATP_HEADER_STATES(after_atp)                                        \
    state parse_ethernet {                                                  \
        pkt.extract(hdr.ethernet);                                          \
        transition select(hdr.ethernet.ether_type) {                        \
            ATP_ETHERTYPE_IPV4 : parse_ipv4;                                \
            default : accept;                                               \
        }                                                                   \
    }                                                                       \
    state parse_ipv4 {                                                      \
        pkt.extract(hdr.ipv4);                                              \
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) { \
            (5, 0, ATP_IP_PROTO_UDP) : parse_udp;                           \
            default : accept;                                               \
        }                                                                   \
    }                                                                       \
    state parse_udp {                                                       \
        pkt.extract(hdr.udp);                                               \
        transition select(hdr.udp.dst_port) {                               \
            ATP_UDP_PORT : parse_atp;                                       \
            default : accept;                                               \
        }                                                                   \
    }                                                                       \
    state parse_atp {                                                       \
        meta.is_atp = 1;  /* from here on a parse error is a malformed ATP packet */ \
        pkt.extract(hdr.atp);                                               \
        transition after_atp;                                               \
    }

parser AtpHeadersParser(packet_in pkt, inout headers_t hdr, inout atp_meta_t meta) {
    state start {
        meta.is_atp = 0;
        transition parse_ethernet;
    }
    ATP_HEADER_STATES(accept)
}

#endif
