#!/bin/sh
# The lab NetworkPolicy cost table (docs/policies-cost.md): what NetworkPolicy costs each data path as policies
# grow, from ONE interleaved run: each mode with each policy provider that
# can serve it (veth-routed and bridge with nftables and iptables; veth-ebpf
# with ebpf when this vnetlab has that provider), tcp_crr and tcp_rr at
# 0/100/1000/10000 generated policies selecting the measured server pod
# (docs/policies-cost.md), each cell proven in force; one line per row: the
# count's median over the same lab's at 0 policies, with its bootstrap 95% CI.
# Then apply latency per provider at 0, 1000 and 10000 policies (vnetlab
# policy converge on a lab of its own): p50/p99 of a policy's add and
# delete (targets: p99 at most 20 ms for ebpf and 50 ms for nftables and
# iptables at 10000, and p50 at 10000 within 2x of p50 at 0).
# Run it under the lab lock (make bench-policies does).
#
#   make bench-policies                                  # build, run (about 25 min here), print the rows
#   REPEAT=8 DURATION=2s scripts/bench-policies.sh
#   COUNTS=0,1000 PROVIDERS=nftables scripts/bench-policies.sh
#   RESULTS=old.json APPLY=0 scripts/bench-policies.sh   # print the rows of an earlier run again
#   CELLS=0 scripts/bench-policies.sh                    # apply latency alone (no data-path cells)
#   OUT=after.json scripts/bench-policies.sh             # where the run's results go (apply latency: OUT's name + -apply-P-N.json)
#   SCALE=1 scripts/bench-policies.sh                    # also each provider's load time at 10000 and 100000 policies and 100000
#                                                        # ipblocks (labpolicy's Info.LoadRate comes from it)
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-bin/vnetlab}
REPEAT=${REPEAT:-5}
DURATION=${DURATION:-2s}
COUNTS=${COUNTS:-0,100,1000,10000}
TESTS=${TESTS:-tcp_crr,tcp_rr}
APPLY=${APPLY:-1}
APPLY_COUNTS=${APPLY_COUNTS:-0 1000 10000}
CELLS=${CELLS:-1}
CHANGES=${CHANGES:-100}
if "$BIN" policy add --help | grep -q 'ebpf'; then
	PROVIDERS=${PROVIDERS:-nftables,iptables,ebpf}
	MODES=${MODES:-veth-routed,bridge,veth-ebpf}
else
	PROVIDERS=${PROVIDERS:-nftables,iptables}
	MODES=${MODES:-veth-routed,bridge}
fi
if [ "$CELLS" = 0 ]; then
	OUT=${OUT:-bench-policies.json}
elif [ -n "${RESULTS:-}" ]; then
	OUT=$RESULTS
else
	OUT=${OUT:-bench-policies.json}
	echo "machine load before the run: $(uptime)"
	"$BIN" run --modes "$MODES" --tests "$TESTS" --policy-providers "$PROVIDERS" --sweep "policies=$COUNTS" \
		--repeat "$REPEAT" --duration "$DURATION" -o "$OUT"
	echo "machine load after the run: $(uptime)"
fi

# row prints one ratio, or why there is none (a provider that cannot
# serve a mode was skipped by the run, with its reason in the file).
# A cell the file lacks (a pair the run skipped) fails row.
row() {
	line=$("$BIN" ratio "$OUT" "$@" 2>&1) || true
	case $line in *"no cell"*) return 1 ;; esac
	echo "$line"
}
cost_rows() {
	base=$(echo "$COUNTS" | cut -d, -f1)
	echo
	echo "the cost of NetworkPolicy ($OUT): each count's median over the same mode and provider at policies=$base [bootstrap 95% CI]"
	for mode in $(echo "$MODES" | tr , ' '); do
		for prov in $(echo "$PROVIDERS" | tr , ' '); do
			for test in $(echo "$TESTS" | tr , ' '); do
				for n in $(echo "$COUNTS" | tr , ' '); do
					[ "$n" = "$base" ] && continue
					target=""
					if [ "$prov" = ebpf ] && [ "$test" = tcp_crr ] && [ "$n" = 10000 ]; then
						target="--target >=0.97"
					fi
					# shellcheck disable=SC2086 # target is one flag and its value, or nothing
					if ! row "$mode/pod:$prov{policies=$n}/$test" "$mode/pod:$prov{policies=$base}/$test" $target; then
						echo "$mode with policy provider $prov: not in the run (its reason is on the run's \"skipped\" line)"
						continue 3
					fi
				done
			done
		done
	done
	if echo "$PROVIDERS" | grep -q ebpf; then
		echo
		echo "the eBPF provider at 10000 policies against the others (its mode's connections over theirs)"
		for other in $(echo "$PROVIDERS" | tr , ' '); do
			[ "$other" = ebpf ] && continue
			row "veth-ebpf/pod:ebpf{policies=10000}/tcp_crr" "veth-routed/pod:$other{policies=10000}/tcp_crr" --target '>=1.00'
		done
	fi
}
[ "$CELLS" = 0 ] || cost_rows

if [ "${SCALE:-0}" = 1 ]; then
	echo
	echo "load time per lab (the whole transaction: check, compile, load), veth-routed; machine load: $(uptime)"
	"$BIN" run --modes veth-routed --tests tcp_rr --policy-providers "$PROVIDERS" --sweep policies=0,10000,100000 --sweep ipblocks=0,100000 \
		--repeat 1 --duration 1s -o "${OUT%.json}-scale.json" 2>&1 | grep ': policy provider .* loaded '
fi

[ "$APPLY" = 1 ] || exit 0
echo
echo "apply latency: a policy allowing the prober added, then deleted, each to its first answered / dropped probe (ms, p50/p99 with 95% CIs)"
lab=bpol$$
trap '"$BIN" down "$lab" >/dev/null 2>&1 || true' EXIT INT TERM
for prov in $(echo "$PROVIDERS" | tr , ' '); do
	mode=veth-routed
	[ "$prov" = ebpf ] && mode=veth-ebpf
	"$BIN" up --name "$lab" --mode "$mode" --pods 2 >/dev/null
	for n in $APPLY_COUNTS; do
		echo "machine load: $(uptime)"
		"$BIN" policy converge "$lab" --provider "$prov" --policies "$n" --changes "$CHANGES" --change-timeout 60s \
			-o "${OUT%.json}-apply-$prov-$n.json" 2>/dev/null
	done
	"$BIN" down "$lab" >/dev/null
done
