// proto::decode as match-action: every check that makes the C++ pipeline drop a packet as
// malformed. Sets meta.malformed; computes the bit facts later stages use.
#ifndef ATP_VALIDATE_P4
#define ATP_VALIDATE_P4

#include "bit_tables.p4"

control ValidateAtp(in headers_t hdr, inout atp_meta_t meta) {
    ContributorIndex() workers_index;
    ContributorIndex() racks_index;
    FanInLimit() rack_fan_in_limit;
    FanInLimit() job_fan_in_limit;
    RackBit() rack_bit;

    apply {
        bit<1> rack_fan_in_ok;
        bit<1> job_fan_in_ok;
        bit<8> racks_at;
        workers_index.apply(hdr.atp.workers_bitmap, meta.workers_single, meta.workers_index);
        racks_index.apply(hdr.atp.racks_bitmap, meta.racks_single, racks_at);
        rack_fan_in_limit.apply(hdr.atp.rack_fan_in, rack_fan_in_ok, meta.workers_limit);
        job_fan_in_limit.apply(hdr.atp.job_fan_in, job_fan_in_ok, meta.racks_limit);
        rack_bit.apply(hdr.atp.rack, meta.rack_bit);

        bit<8> f = hdr.atp.flags;
        bool result = (f & FLAG_RESULT) != 0;
        bool float_request = (f & FLAG_FLOAT_REQUEST) != 0;
        meta.downward = (result || float_request || hdr.atp.kind == KIND_JOINED) ? 1w1 : 1w0;
        bool bad = hdr.atp.version != ATP_VERSION || hdr.atp.reserved != 0 ||
                   hdr.atp.kind > KIND_JOINED || hdr.atp.value_count > ATP_MAX_VALUES ||
                   hdr.udp.length != 8 + ATP_HEADER_BYTES + (hdr.atp.value_count << 2) ||
                   hdr.atp.next_level > LEVEL_SPINE;
        if (hdr.atp.kind != KIND_FRAGMENT) {
            // The run handshake: no flags, no values, exactly one worker.
            bad = bad || f != 0 || hdr.atp.value_count != 0 || hdr.atp.racks_bitmap != 0 ||
                  meta.workers_single == 0;
        } else {
            bad = bad || (result && float_request) ||
                  (meta.downward == 1 && (f & (FLAG_RESEND | FLAG_COLLISION)) != 0) ||
                  ((f & FLAG_WRAPPED) != 0 && (f & FLAG_FLOAT_PAYLOAD) != 0) ||
                  ((f & FLAG_REMAP) != 0 && !result) ||
                  (meta.downward == 0 && hdr.atp.value_count == 0);
        }
        // Contributors (protocol.md §5).
        bad = bad || rack_fan_in_ok == 0 || job_fan_in_ok == 0 ||
              hdr.atp.rack >= hdr.atp.job_fan_in ||
              (hdr.atp.workers_bitmap & ~meta.workers_limit) != 0 ||
              (hdr.atp.racks_bitmap & ~meta.racks_limit) != 0;
        if (meta.downward == 0) {
            bad = bad || (hdr.atp.workers_bitmap == 0 && hdr.atp.racks_bitmap == 0) ||
                  (hdr.atp.workers_bitmap != 0 && (hdr.atp.racks_bitmap & meta.rack_bit) != 0);
        }
        meta.malformed = bad ? 1w1 : 1w0;
    }
}

#endif
