#!/bin/sh
# The eBPF data-path table (docs/performance.md): every data-path row as a ratio with its bootstrap 95% CI and
# its target, from ONE interleaved run (scenarios/bench-paths.yaml), then the
# engine rows of scripts/bench-engine.sh (built-in rr/crr against C references).
#
#   make bench-paths                          # build, run (3.5 min here), print the rows
#   REPEAT=8 scripts/bench-paths.sh           # more samples per cell
#   RESULTS=old.json scripts/bench-paths.sh   # print the rows of an earlier run again
#   OUT=after.json scripts/bench-paths.sh     # where the run's results go
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-bin/vnetlab}
REPEAT=${REPEAT:-5}
if [ -n "${RESULTS:-}" ]; then
	OUT=$RESULTS
else
	OUT=${OUT:-bench-paths.json}
	echo "machine load before the run: $(uptime)"
	"$BIN" run -f scenarios/bench-paths.yaml --repeat "$REPEAT" -o "$OUT"
	echo "machine load after the run: $(uptime)"
fi

row() { "$BIN" ratio "$OUT" "$@"; }
echo
echo "eBPF data-path rows ($OUT): ratio of medians [bootstrap 95% CI]; MET/SHORT when the whole CI is on one side of the target"
row veth-ebpf/pod/tcp_rr macvlan/pod/tcp_rr --target '>=1.00'
row veth-ebpf/pod/tcp_rr host/pod/tcp_rr --target '>=0.97'
row veth-ebpf/pod/tcp_stream macvlan/pod/tcp_stream --target '>=1.00'
row veth-ebpf/pod/tcp_stream macvlan/pod/tcp_stream --metric cpu-per-gb --target '<=1.00'
for mode in veth-routed veth-ebpf; do
	for n in "" +10000 +100000; do
		row "$mode/service(ebpf$n)/tcp_crr" "$mode/pod/tcp_crr" --target '>=0.97'
	done
done
for mode in veth-routed bridge; do
	row "$mode/service(ebpf)/tcp_stream" "$mode/pod/tcp_stream" --target '>=0.98'
done
for mode in veth-routed veth-ebpf; do
	row "$mode/service(ebpf-sock)/tcp_crr" "$mode/pod/tcp_crr" --target '>=0.99'
done

# The engine rows (built-in rr/crr against a C reference, pinned) come from
# their own script, printing lines in the same format.
if [ -n "${RESULTS:-}" ]; then
	echo "(engine rows: measured, not read from $OUT: scripts/bench-engine.sh)"
elif [ -x scripts/bench-engine.sh ]; then
	echo
	scripts/bench-engine.sh
else
	echo "(engine rows: scripts/bench-engine.sh is not in this tree)"
fi
