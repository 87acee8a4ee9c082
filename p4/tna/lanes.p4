// The value lanes of the TNA program, all in this file: how many there are (the values one
// pass carries; what fits Tofino 1's stages, docs/p4.md), X(i) for each lane, and the parser's
// states, one per lane: Y(i, i + 1), ending at ATP_LAST_VALUE_STATE.
#ifndef ATP_TNA_LANES_P4
#define ATP_TNA_LANES_P4

#define ATP_LANES 14
#define ATP_LAST_VALUE_STATE parse_value_14

#define ATP_FOR_EACH_LANE(X) \
    X(0) \
    X(1) \
    X(2) \
    X(3) \
    X(4) \
    X(5) \
    X(6) \
    X(7) \
    X(8) \
    X(9) \
    X(10) \
    X(11) \
    X(12) \
    X(13) \

#define ATP_FOR_EACH_LANE_STATE(Y) \
    Y(0, 1) \
    Y(1, 2) \
    Y(2, 3) \
    Y(3, 4) \
    Y(4, 5) \
    Y(5, 6) \
    Y(6, 7) \
    Y(7, 8) \
    Y(8, 9) \
    Y(9, 10) \
    Y(10, 11) \
    Y(11, 12) \
    Y(12, 13) \
    Y(13, 14) \

#endif
