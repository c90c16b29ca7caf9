#!/bin/sh
# Issue 30's fidelity table: flannel (vxlan and host-gw, 2-node local clusters)
# against the lab modes that claim its shape: bridge (same node), vxlan and
# host-gw (2 nodes), with the host path / host mode as the node-to-node
# baseline. `run` and `kube run` are separate commands, so the rounds are
# interleaved by run, not by cell: lab, cluster vxlan, lab, cluster host-gw,
# lab, each step under the machine's lock (taken and released per step), then
# `vnetlab compare` of each cluster against the lab runs before and after it,
# and each side's pod path over its own node-to-node (host) path: the cluster's
# nodes meet on a bridge in the control plane's namespace beside its daemons,
# the lab's two nodes on one veth, so the host cells differ too.
# Cross-node, scenarios/fidelity-flannel.yaml (kube.lab) measures the 2-node lab
# beside a cluster cell by cell in one run and one file (docs/kubernetes.md);
# this script keeps the same-node rows (a 1-node lab) and both backends in one go.
# Since issue 30's profiling, --cpu-affinity auto pins the cluster's rr/crr too
# (kube run --cluster), as it pins the lab's; earlier tables had them unpinned.
#
#   scripts/bench-flannel.sh                         # ~20 min here
#   REPEAT=3 DURATION=2s OUT=dir scripts/bench-flannel.sh
#   OUT=dir COMPARE_ONLY=1 scripts/bench-flannel.sh  # print the comparisons of an earlier run
#   OUT=dir STEPS="host-gw lab3" scripts/bench-flannel.sh  # only these steps (resume a run)
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-$PWD/bin/vnetlab}
OUT=${OUT:-bench-flannel}
LOCK=${TEST_LOCK:-/run/vnetlab-dev.lock}
TESTS=tcp_stream,tcp_rr,tcp_crr
M="--tests $TESTS --repeat ${REPEAT:-5} --duration ${DURATION:-3s} --cpu-affinity auto"
locked() { flock -w 3600 "$LOCK" "$@"; }

lab() { # lab N: the 1-node labs (host, bridge) and the 2-node labs (host, host-gw, vxlan)
	echo "lab $1: $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
	locked "$BIN" run --modes host,bridge --paths pod $M -o "$OUT/lab$1-1node.json" >"$OUT/lab$1-1node.txt"
	locked "$BIN" run --nodes 2 --modes host,host-gw,vxlan --paths pod $M -o "$OUT/lab$1-2node.json" >"$OUT/lab$1-2node.txt"
}

cluster() { # cluster BACKEND: up, measure pod and host paths, down, in one hold of the lock
	echo "cluster $1: $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
	# short cluster names: node names (NAME-node1) are interface names, 15 characters at most
	name=fl-$(echo "$1" | cut -c1-2)
	locked sh -c "'$BIN' kube up --name $name --cni flannel --flannel-backend $1 --nodes 2 &&
		'$BIN' kube run --cluster $name --label flannel-$1 --paths pod,host $M -o '$OUT/flannel-$1.json'; code=\$?;
		'$BIN' kube down $name; exit \$code" >"$OUT/flannel-$1.txt" 2>&1
	grep -E '^cluster .* (up in|removed in)|^kube' "$OUT/flannel-$1.txt" || true
}

if [ -z "${COMPARE_ONLY:-}" ]; then
	mkdir -p "$OUT"
	for step in ${STEPS:-lab1 vxlan lab2 host-gw lab3}; do
		case $step in
		lab*) lab "${step#lab}" ;;
		*) cluster "$step" ;;
		esac
	done
	echo "done: $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
fi

for pair in "1 vxlan" "2 vxlan" "2 host-gw" "3 host-gw"; do
	set -- $pair
	for lab in "$OUT/lab$1-1node.json" "$OUT/lab$1-2node.json"; do
		echo
		echo "\$ vnetlab compare $lab $OUT/flannel-$2.json"
		"$BIN" compare "$lab" "$OUT/flannel-$2.json" | grep -v '^only in'
	done
done

echo
echo "pod over host (node to node), each run on its own: ratio of medians [bootstrap 95% CI]"
r() { printf '%-20s ' "$(basename "$1")"; "$BIN" ratio "$@" 2>&1 || true; }
for t in tcp_stream tcp_rr tcp_crr; do
	for b in vxlan host-gw; do
		for p in same-node cross-node; do r "$OUT/flannel-$b.json" "flannel-$b/pod@$p/$t" "flannel-$b/host@$p/$t"; done
	done
	for n in 1 2 3; do
		r "$OUT/lab$n-1node.json" "bridge/pod/$t" "host/pod/$t"
		for m in vxlan host-gw; do r "$OUT/lab$n-2node.json" "$m/pod/$t" "host/pod/$t"; done
	done
done
