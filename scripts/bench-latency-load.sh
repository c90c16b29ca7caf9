#!/bin/sh
# The latency-under-load numbers: latency against offered load per data path, then
# the stall test's p99s.
#
# 1. One interleaved run of scenarios/latency-load.yaml: host, veth-routed,
#    bridge, macvlan and veth-ebpf, tcp_crr open-loop at 10/50/80/95% of each
#    path's own closed-loop maximum (measured first, recorded as rate_max), with
#    p50/p99/p99.9, each with its bootstrap 95% CI and the latencies behind it;
#    the report (Markdown, HTML, SVG/PNG charts: p50/p99/p99.9 against the offered
#    rate, each path's knee) in $OUT.report/; explain's sentence on the knees.
# 2. The stall test (internal/measure/rrbench: a 100 ms SIGSTOP of the server in
#    a 3 s tcp_rr sample at 2000/s): open- and closed-loop p99, with and without
#    the stall, as the test logs them.
#
# Load average before and after each: the machine is shared, the numbers noisy.
#
#   make bench-latency-load                    # build, run (~10 min here), print
#   REPEAT=5 DURATION=6s scripts/bench-latency-load.sh
#   TESTS=tcp_crr,tcp_rr scripts/bench-latency-load.sh
#   RESULTS=old.json scripts/bench-latency-load.sh   # table, report and explain of an earlier run
# It builds labs: run it under the machine's lock (make does).
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
OUT=${OUT:-latency-load.json}
if [ -n "${RESULTS:-}" ]; then
	OUT=$RESULTS
else
	echo "load average before the run: $(uptime)"
	"$bin" run -f scenarios/latency-load.yaml -o "$OUT" \
		${REPEAT:+--repeat "$REPEAT"} ${DURATION:+--duration "$DURATION"} ${TESTS:+--tests "$TESTS"}
	echo "load average after the run: $(uptime)"
fi
"$bin" report "$OUT" -o "$OUT.report" >/dev/null
echo "report: $OUT.report/ (report.md, report.html, curve-*-rate-p99.svg ...)"
echo
sed -n '/^## Knobs: curves/,/^## [^K]/p' "$OUT.report/report.md" | sed '$d'
echo
"$bin" explain "$OUT" --knob rate || true
echo
echo "stall test (open loop 2000/s on loopback in a scratch namespace; load average: $(uptime | sed 's/.*average: //'))"
go test -count=1 -run TestOpenLoopMeasuresFromIntendedTime -v ./internal/measure/rrbench/ 2>&1 | grep -E 'open loop [0-9]+/s: p99|^(--- |ok|FAIL)'
echo "load average after the stall test: $(uptime)"
