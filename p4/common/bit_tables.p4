// Small exact-match tables that stand in for arithmetic a switch ALU does not have: no popcount,
// no shift by a header field. Each maps a header byte or bitmap to a constant.
#ifndef ATP_BIT_TABLES_P4
#define ATP_BIT_TABLES_P4

#include "headers.p4"

// The contributor-index table (SwitchML's bitmap checker, inverted): a bitmap with exactly
// one bit set hits and yields that bit's index; any other bitmap misses. It replaces popcount.
control ContributorIndex(in bit<32> bitmap, out bit<1> single, out bit<8> index) {
    action one(bit<8> i) { single = 1; index = i; }
    action not_one() { single = 0; index = 0; }
    table contributor_index {
        key = { bitmap : exact; }
        actions = { one; not_one; }
        const default_action = not_one();
        const entries = {
            0x00000001 : one(0);
            0x00000002 : one(1);
            0x00000004 : one(2);
            0x00000008 : one(3);
            0x00000010 : one(4);
            0x00000020 : one(5);
            0x00000040 : one(6);
            0x00000080 : one(7);
            0x00000100 : one(8);
            0x00000200 : one(9);
            0x00000400 : one(10);
            0x00000800 : one(11);
            0x00001000 : one(12);
            0x00002000 : one(13);
            0x00004000 : one(14);
            0x00008000 : one(15);
            0x00010000 : one(16);
            0x00020000 : one(17);
            0x00040000 : one(18);
            0x00080000 : one(19);
            0x00100000 : one(20);
            0x00200000 : one(21);
            0x00400000 : one(22);
            0x00800000 : one(23);
            0x01000000 : one(24);
            0x02000000 : one(25);
            0x04000000 : one(26);
            0x08000000 : one(27);
            0x10000000 : one(28);
            0x20000000 : one(29);
            0x40000000 : one(30);
            0x80000000 : one(31);
        }
    }
    apply { contributor_index.apply(); }
}

// low_bits(n) for a fan-in n in 1..32: the bits a bitmap of that fan-in may use. A miss (0 or
// above 32) is a malformed fan-in.
control FanInLimit(in bit<8> fan_in, out bit<1> valid, out bit<32> limit) {
    action bits(bit<32> mask) { valid = 1; limit = mask; }
    action out_of_range() { valid = 0; limit = 0; }
    table fan_in_limit {
        key = { fan_in : exact; }
        actions = { bits; out_of_range; }
        const default_action = out_of_range();
        const entries = {
            1 : bits(0x00000001);
            2 : bits(0x00000003);
            3 : bits(0x00000007);
            4 : bits(0x0000000f);
            5 : bits(0x0000001f);
            6 : bits(0x0000003f);
            7 : bits(0x0000007f);
            8 : bits(0x000000ff);
            9 : bits(0x000001ff);
            10 : bits(0x000003ff);
            11 : bits(0x000007ff);
            12 : bits(0x00000fff);
            13 : bits(0x00001fff);
            14 : bits(0x00003fff);
            15 : bits(0x00007fff);
            16 : bits(0x0000ffff);
            17 : bits(0x0001ffff);
            18 : bits(0x0003ffff);
            19 : bits(0x0007ffff);
            20 : bits(0x000fffff);
            21 : bits(0x001fffff);
            22 : bits(0x003fffff);
            23 : bits(0x007fffff);
            24 : bits(0x00ffffff);
            25 : bits(0x01ffffff);
            26 : bits(0x03ffffff);
            27 : bits(0x07ffffff);
            28 : bits(0x0fffffff);
            29 : bits(0x1fffffff);
            30 : bits(0x3fffffff);
            31 : bits(0x7fffffff);
            32 : bits(0xffffffff);
        }
    }
    apply { fan_in_limit.apply(); }
}

// 1 << rack, for a rack index below 32 (anything else is refused by validation first).
control RackBit(in bit<8> rack, out bit<32> rack_bit) {
    action set(bit<32> b) { rack_bit = b; }
    table rack_bit_of {
        key = { rack : exact; }
        actions = { set; }
        const default_action = set(0);
        const entries = {
            0 : set(0x00000001);
            1 : set(0x00000002);
            2 : set(0x00000004);
            3 : set(0x00000008);
            4 : set(0x00000010);
            5 : set(0x00000020);
            6 : set(0x00000040);
            7 : set(0x00000080);
            8 : set(0x00000100);
            9 : set(0x00000200);
            10 : set(0x00000400);
            11 : set(0x00000800);
            12 : set(0x00001000);
            13 : set(0x00002000);
            14 : set(0x00004000);
            15 : set(0x00008000);
            16 : set(0x00010000);
            17 : set(0x00020000);
            18 : set(0x00040000);
            19 : set(0x00080000);
            20 : set(0x00100000);
            21 : set(0x00200000);
            22 : set(0x00400000);
            23 : set(0x00800000);
            24 : set(0x01000000);
            25 : set(0x02000000);
            26 : set(0x04000000);
            27 : set(0x08000000);
            28 : set(0x10000000);
            29 : set(0x20000000);
            30 : set(0x40000000);
            31 : set(0x80000000);
        }
    }
    apply { rack_bit_of.apply(); }
}

#endif
