#!/usr/bin/env bash
# `make p4-test` (and ctest's p4_compile, then p4_conformance): compile the P4 programs and fit
# the TNA one to Tofino 1, checking the control plane's scripts against it; then replay the
# switch traces the engine tests and the simulator write through BMv2 and compare every packet
# out; then real runs of workers and PSs through BMv2 switches
# (tests/integration/test_bmv2_cluster.py).
# Usage: run.sh [BUILD_DIR] [all|compile|replay]. `compile` is the first half (no timing in it:
# ctest runs it beside the unit tests), `replay` the second (a network namespace and real runs:
# alone), `all` both. Needs the P4 toolchain on PATH (docs/p4.md says how to install it) and,
# to replay, root for the network namespace; without them it says what is missing and exits 77
# (ctest: skipped).
set -euo pipefail
build=$(realpath "${1:-build}")
part=${2:-all}
case "$part" in
  all | compile | replay) ;;
  *) echo "usage: run.sh [BUILD_DIR] [all|compile|replay]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/p4"

tools=(p4c-bm2-ss)
[ "$part" = compile ] || tools+=(simple_switch simple_switch_CLI)
missing=()
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "p4-test: skipped: not on PATH: ${missing[*]} (docs/p4.md: installing the P4 toolchain)"
  exit 77
fi
if [ "$part" != compile ] && [ "$(id -u)" -ne 0 ]; then
  echo "p4-test: skipped: replaying on BMv2 needs root (a network namespace and veth pairs)"
  exit 77
fi
mkdir -p "$out"

compile_v1model() {
  echo "p4-test: compiling p4/v1model/atp.p4 for BMv2"
  p4c-bm2-ss --arch v1model -o "$out/atp.json" "$here/p4/v1model/atp.p4" 2>"$out/p4c-bm2-ss.log" ||
    { cat "$out/p4c-bm2-ss.log"; exit 1; }
}

# The TNA program fitted and assembled, and what `atp p4 config` and the agent write for it
# checked against its bfrt.json.
fit_tna() {
  if [ ! -f "$here/p4/tna/atp.p4" ]; then
    echo "p4-test: TNA fit skipped: p4/tna/ has no program yet (docs/p4.md, status)"
  elif command -v p4c >/dev/null &&
    [[ "$(p4c --target tofino --arch tna -o "$out/tna-probe" /dev/null 2>&1 || true)" != *"Unknown backend"* ]]; then
    # (p4c answers --help and --version for any target; only a compile names a missing backend.)
    "$here/p4/tna/fit.sh" "$out/tna"
    echo "p4-test: checking atp p4 config --target tofino against the fit's bfrt.json"
    # The example with its loopback ports on (a Tofino-only key, commented out for BMv2's sake).
    example="$out/tna/p4_two_racks_loopback.toml"
    sed 's/^# loopback_ports = /loopback_ports = /' "$here/examples/p4_two_racks.toml" >"$example"
    grep -q '^loopback_ports = ' "$example" ||
      { echo "p4-test: examples/p4_two_racks.toml has no '# loopback_ports = ' line to turn on"; exit 1; }
    for name in rackA rackB spine; do
      "$build/bin/atp" p4 config --config "$example" --switch "$name" --target tofino \
        >"$out/tna/$name.py"
    done
    "$build/bin/atp" p4 config --config "$example" --switch rackA --target tofino --job 8 \
      --remove >"$out/tna/rackA-remove-job8.py"
    /usr/bin/python3 "$here/p4/tna/check_bfrt_names.py" "$out/tna/bfrt.json" "$out"/tna/*.py
    echo "p4-test: atp p4 agent --target tofino: a job removed and admitted again, each script checked"
    agent="$out/tna/agent"
    rm -rf "$agent" && mkdir -m 0700 "$agent"  # the agent refuses a folder others can write
    "$build/bin/atp" p4 agent --target tofino --config "$example" --name rackA \
      --control "$agent/control.sock" --script-dir "$agent" \
      --bfrt-shell "/usr/bin/python3 $here/p4/tna/check_bfrt_names.py $out/tna/bfrt.json" \
      >"$agent/agent.log" 2>&1 &
    agent_pid=$!
    for _ in $(seq 100); do [ -S "$agent/control.sock" ] && break; sleep 0.1; done
    ok=1
    "$build/bin/atp" ctl --socket "$agent/control.sock" remove --job 8 >/dev/null || ok=0
    "$build/bin/atp" ctl --socket "$agent/control.sock" admit --config "$example" --job 8 >/dev/null || ok=0
    kill "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" || true
    if [ "$ok" != 1 ] || [ ! -f "$agent/rackA-3-job8-add.py" ]; then
      cat "$agent/agent.log"
      echo "p4-test: the Tofino agent's scripts were refused (log above, scripts in $agent)"
      exit 1
    fi
    # The member learner the agent leaves to a session of its own (not run: no Tofino here).
    /usr/bin/python3 "$here/p4/tna/check_bfrt_names.py" "$out/tna/bfrt.json" \
      "$agent/rackA-learn-members.py"
  else
    echo "p4-test: TNA fit skipped: no p4c with the Tofino backend on PATH"
  fi
}

replay_and_run() {
  # Alone (ctest -R p4_conformance), the BMv2 program is compiled here when missing or older
  # than a source.
  if [ ! -f "$out/atp.json" ] || [ -n "$(find "$here/p4" -name '*.p4' -newer "$out/atp.json")" ]; then
    compile_v1model
  fi
  rm -rf "$out/traces" && mkdir -p "$out/traces/unit" "$out/traces/sim-one-rack" "$out/traces/sim-two-racks"
  echo "p4-test: writing traces"
  ATP_TRACE_DIR="$out/traces/unit" "$build/bin/switch_pipeline_test" >/dev/null
  # Two small simulated runs: two jobs sharing a small pool on one rack with static slices, and
  # two racks under loss (level 1 and level 2 switches, collisions, resends, flushes).
  "$build/bin/atp" sim --racks 1 --workers-per-rack 3 --jobs 2 --aggregators 16 --window 8 \
    --values-per-packet 32 --tensor-bytes 2048 --iterations 2 --duplicate 0.05 \
    --trace-dir "$out/traces/sim-one-rack" >/dev/null
  "$build/bin/atp" sim --racks 2 --workers-per-rack 2 --jobs 2 --aggregators 16 --window 8 \
    --values-per-packet 64 --tensor-bytes 4096 --iterations 2 --loss 0.05 \
    --trace-dir "$out/traces/sim-two-racks" >/dev/null
  for d in "$out"/traces/sim-*; do
    for f in "$d"/*.jsonl; do mv "$f" "$d-$(basename "$f")"; done
    rmdir "$d"
  done

  echo "p4-test: replaying through simple_switch"
  PYTHONPATH="$build/python" /usr/bin/python3 "$here/p4/conformance/bmv2_replay.py" \
    --program "$out/atp.json" --atp "$build/bin/atp" --netns "atp-p4-$$" \
    "$out"/traces/unit/*.jsonl "$out"/traces/sim-*.jsonl

  echo "p4-test: real runs: atp workers and PSs through BMv2 switches in namespaces"
  ATP_BIN="$build/bin/atp" ATP_P4_PROGRAM="$out/atp.json" \
    /usr/bin/python3 "$here/tests/integration/test_bmv2_cluster.py"
}

if [ "$part" != replay ]; then
  compile_v1model
  fit_tna
fi
if [ "$part" != compile ]; then
  replay_and_run
fi
