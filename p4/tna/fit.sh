#!/usr/bin/env bash
# Compiles p4/tna/atp.p4 for Tofino 1 with bf-p4c and checks that it fits: every table placed
# within the 12 stages of a pipe. Prints the resource budget (docs/p4.md, "TNA"). Where the
# Tofino assembler (bfas, p4c v1.2.5.5 and later) sits beside p4c, the program is assembled too
# and the check asks for the binary it writes (pipe/tofino.bin); an older backend has no
# assembler, so `-S` (stop at the assembly) is the check there (without it that driver exits 1
# after a good compile). Usage: fit.sh OUT_DIR
set -euo pipefail
out=${1:?usage: fit.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
stop=(-S)
what="compiling"
if command -v bfas >/dev/null || [ -x "$(dirname "$(command -v p4c)")/bfas" ]; then
  stop=()
  what="compiling and assembling"
fi
if ! /usr/bin/python3 "$here/write_lanes.py" "$out/lanes.p4" || ! cmp -s "$out/lanes.p4" "$here/lanes.p4"; then
  echo "p4-test: p4/tna/lanes.p4 is not what write_lanes.py writes: run python3 p4/tna/write_lanes.py"
  exit 1
fi
echo "p4-test: $what p4/tna/atp.p4 for Tofino 1 (bf-p4c)"
if ! p4c --target tofino --arch tna -g "${stop[@]}" -o "$out" "$here/atp.p4" >"$out/bf-p4c.log" 2>&1; then
  grep -i -B2 -A4 "error" "$out/bf-p4c.log" | head -40
  echo "p4-test: p4/tna/atp.p4 does not compile for Tofino 1 (log: $out/bf-p4c.log)"
  exit 1
fi
if [ ${#stop[@]} -eq 0 ] && [ ! -s "$out/pipe/tofino.bin" ]; then
  echo "p4-test: the assembler wrote no $out/pipe/tofino.bin (log: $out/bf-p4c.log)"
  exit 1
fi
lanes=$(sed -n 's/^#define ATP_LANES \([0-9]*\).*/\1/p' "$here/lanes.p4")
pool=$(sed -n 's/^#define ATP_POOL \([0-9]*\).*/\1/p' "$here/atp.p4")
/usr/bin/python3 "$here/fit_report.py" --lanes "$lanes" --pool "$pool" "$out/pipe/logs"
