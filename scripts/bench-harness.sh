#!/bin/sh
# What vnetlab's harness costs the numbers it reports: `vnetlab run`
# against the standalone engine on the same paths (veth-routed and bridge;
# tcp_rr, udp_rr, tcp_crr, tcp_stream), interleaved rounds, every test pinned as
# run pins them, per cell the ratio of the medians run /
# fresh (the engine alone in labs built that round, as run's are: the harness
# alone), then run / standalone and fresh / standalone (labs up all along: what
# a lab's age moves, no target), each with its bootstrap 95% CI, the first two
# against the target (>= 0.99), and the load averages before and after:
#
#   harness veth-routed/pod/tcp_rr  run / fresh  0.998 [0.990, 1.006]  target >= 0.99  MET
#
# Then the engine itself against the C references (scripts/bench-engine.sh:
# tools/rr-ref, tools/crr-ref) and, when netperf and netserver are on PATH,
# against netperf's TCP_RR and UDP_RR (row netperf).
#
# Usage (it builds labs: run it under the machine's lock):
#   flock /run/vnetlab-dev.lock scripts/bench-harness.sh [--repeat 7] [--duration 2s] [--modes veth-routed,bridge] [--tests ...] [--run-args "--profile"]
#   scripts/bench-harness.sh --help
# VNETLAB_BIN: the vnetlab measured (default: built from this tree); an older
# binary gives the "before" table. HARNESS_ONLY=1 skips the engine rows.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
CGO_ENABLED=0 go build -o "$cache/bench-harness" ./tools/bench-harness
VNETLAB_BIN="$bin" "$cache/bench-harness" "$@"
[ "${HARNESS_ONLY:-}" = 1 ] && exit 0
rows=rr,udp,crr
if command -v netperf >/dev/null 2>&1 && command -v netserver >/dev/null 2>&1; then
	rows=$rows,netperf,netperf-udp
fi
VNETLAB_BIN="$bin" scripts/bench-engine.sh --rows "$rows"
