#!/bin/sh
# The flannel fidelity table: flannel (vxlan and host-gw, 2-node local clusters)
# against the lab modes that claim its shape, one run of
# scenarios/fidelity-flannel.yaml per backend: the labs (host, host-gw, vxlan on
# two nodes; host, bridge on one) beside the cluster, a lab cell then a cluster
# cell each round, all in one results file. Then `vnetlab compare` of each file
# (its lab cells against its cluster cells, by path) and each side's pod path
# over its own node path (host): the cluster's nodes meet on a bridge in the
# control plane's namespace beside its daemons, the lab's two nodes on one veth,
# so the host cells differ too (docs/kubernetes-vs-lab.md).
#
#   scripts/bench-flannel.sh                          # both backends, ~25 min here
#   REPEAT=3 DURATION=2s OUT=dir scripts/bench-flannel.sh
#   BACKENDS=host-gw OUT=dir scripts/bench-flannel.sh # one backend (resume a run)
#   OUT=dir COMPARE_ONLY=1 scripts/bench-flannel.sh   # print the comparisons of an earlier run
# Each cluster's up, run and down hold the machine's lock (TEST_LOCK).
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-$PWD/bin/vnetlab}
OUT=${OUT:-bench-flannel}
LOCK=${TEST_LOCK:-/run/vnetlab-dev.lock}
BACKENDS=${BACKENDS:-vxlan host-gw}
M="--repeat ${REPEAT:-5} --duration ${DURATION:-3s}"

if [ -z "${COMPARE_ONLY:-}" ]; then
	mkdir -p "$OUT"
	for b in $BACKENDS; do
		echo "flannel $b: $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
		# short cluster names: node names (NAME-node1) are interface names, 15 characters at most
		name=fl-$(echo "$b" | cut -c1-2)
		flock -w 3600 "$LOCK" sh -c "'$BIN' kube up --name $name --cni flannel --flannel-backend $b --nodes 2 &&
			'$BIN' kube run -f scenarios/fidelity-flannel.yaml --cluster $name --label flannel-$b $M -o '$OUT/fid-$b.json'; code=\$?;
			'$BIN' kube down $name; exit \$code" >"$OUT/fid-$b.txt" 2>&1 || { tail -5 "$OUT/fid-$b.txt"; exit 1; }
		grep -E '^cluster .* (up in|removed in)' "$OUT/fid-$b.txt" || true
	done
	echo "done: $(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg)"
fi

r() { printf '  '; "$BIN" ratio "$@" 2>&1 || true; }
for b in $BACKENDS; do
	f=$OUT/fid-$b.json
	echo
	echo "\$ vnetlab compare $f"
	"$BIN" compare "$f" | grep -v '^only in'
	echo
	echo "pod over host (node to node) on each side, ratio of medians [bootstrap 95% CI]:"
	for t in tcp_stream tcp_rr tcp_crr; do
		for p in same-node cross-node; do r "$f" "flannel-$b/pod@$p/$t" "flannel-$b/host@$p/$t"; done
		r "$f" "bridge-1node/pod/$t" "host-1node/pod/$t"
		r "$f" "$b/pod/$t" "host/pod/$t"
	done
done
