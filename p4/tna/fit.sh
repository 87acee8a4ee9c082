#!/usr/bin/env bash
# Compiles p4/tna/atp.p4 for Tofino 1 with bf-p4c and checks that it fits: every table placed
# within the 12 stages of a pipe. Prints the resource budget (docs/p4.md, "TNA"). The open-source
# backend has no assembler, so `-S` (stop at the assembly) is the check; without it the driver
# exits 1 after a good compile. Usage: fit.sh OUT_DIR
set -euo pipefail
out=${1:?usage: fit.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
echo "p4-test: compiling p4/tna/atp.p4 for Tofino 1 (bf-p4c)"
if ! p4c --target tofino --arch tna -g -S -o "$out" "$here/atp.p4" >"$out/bf-p4c.log" 2>&1; then
  grep -i -B2 -A4 "error" "$out/bf-p4c.log" | head -40
  echo "p4-test: p4/tna/atp.p4 does not compile for Tofino 1 (log: $out/bf-p4c.log)"
  exit 1
fi
lanes=$(sed -n 's/^#define ATP_LANES \([0-9]*\).*/\1/p' "$here/lanes.p4")
pool=$(sed -n 's/^#define ATP_POOL \([0-9]*\).*/\1/p' "$here/atp.p4")
/usr/bin/python3 "$here/fit_report.py" --lanes "$lanes" --pool "$pool" "$out/pipe/logs"
