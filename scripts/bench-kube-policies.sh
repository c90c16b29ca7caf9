#!/bin/sh
# The cluster NetworkPolicy cost table (docs/kubernetes-policies.md): what NetworkPolicies cost a cluster's pod
# path per enforcer, each beside a one-node lab of the cluster's shape whose
# policies go through the lab provider with the enforcer's data path
# (kube run with kube.lab: one interleaved, pinned, profiled run per
# enforcer). tcp_crr and tcp_rr at 0/100/1000 generated policies on the
# same-node pod path, every cell proven in force. Prints each count's
# median over the same side's at 0 policies [bootstrap 95% CI], lab and
# cluster, and the enforcer's CPU per unit from the profiles (explain
# --knob policies); writes each run's results and report under OUT.
# Then, on the same cluster, each enforcer's apply latency (kube converge
# --policy) at APPLY_COUNTS policies: p50/p99 of a policy's add and delete
# and of the probed pod's label change, with the controllers' CPU and
# memory (targets for vnetlab's controller: p99 at most 20 ms at 1000
# policies and 50 ms at 10000). kube-router is measured at KR_APPLY_COUNTS
# (its full resync per change takes seconds at 1000 already).
# Run it under the lab lock (make bench-kube-policies does).
#
#   make bench-kube-policies                          # three enforcers, about 25 min here
#   ENFORCERS=ebpf REPEAT=8 scripts/bench-kube-policies.sh
#   COUNTS=0,1000 TESTS=tcp_crr OUT=dir scripts/bench-kube-policies.sh
#   CELLS=0 APPLY_COUNTS="0 1000" scripts/bench-kube-policies.sh   # apply latency alone
#   APPLY=0 scripts/bench-kube-policies.sh                         # the cost table alone
#
# Enforcers (cluster; lab mode and provider):
#   ebpf         vnetlab's controller, eBPF backend: --cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf; lab veth-ebpf + ebpf
#   nftables     vnetlab's controller, nftables backend: --cni vnetlab --cni-mode veth-routed --proxy vnetlab-ebpf; lab veth-routed + nftables
#   kube-router  kube-router's controller: --cni bridge --network-policy kube-router (kube-proxy iptables); lab bridge + iptables
#   cilium       Cilium's agent (built on first use): --cni cilium --proxy cilium; lab veth-ebpf + ebpf, the shape
#                that claims to be it. Its apply latency takes CILIUM_CHANGES changes (20) with a change
#                timeout of 60 s: a pod's label change takes its agent seconds (a new identity).
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-bin/vnetlab}
REPEAT=${REPEAT:-5}
DURATION=${DURATION:-2s}
COUNTS=${COUNTS:-0,100,1000}
TESTS=${TESTS:-tcp_crr,tcp_rr}
ENFORCERS=${ENFORCERS:-ebpf nftables kube-router}
OUT=${OUT:-bench-kube-policies}
CELLS=${CELLS:-1}
APPLY=${APPLY:-1}
APPLY_COUNTS=${APPLY_COUNTS:-0 1000 10000}
KR_APPLY_COUNTS=${KR_APPLY_COUNTS:-0 1000}
CHANGES=${CHANGES:-100}
CILIUM_CHANGES=${CILIUM_CHANGES:-20}
mkdir -p "$OUT"

# config sets name, mode (the lab's, the cluster's CNI shape), prov (the
# lab provider) and up (kube up's flags) for enforcer $1.
config() {
	case $1 in
	ebpf) name=kpe mode=veth-ebpf prov=ebpf up="--cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf" ;;
	nftables) name=kpn mode=veth-routed prov=nftables up="--cni vnetlab --cni-mode veth-routed --proxy vnetlab-ebpf" ;;
	kube-router) name=kpk mode=bridge prov=iptables up="--cni bridge --network-policy kube-router" ;;
	cilium) name=kpc mode=veth-ebpf prov=ebpf up="--cni cilium --proxy cilium" ;;
	*)
		echo "unknown enforcer $1: ENFORCERS takes ebpf, nftables, kube-router, cilium" >&2
		exit 2
		;;
	esac
}
for e in $ENFORCERS; do config "$e"; done # refuse a typo before anything is made

up=""
cleanup() { [ -z "$up" ] || "$BIN" kube down "$up" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

for e in $ENFORCERS; do
	config "$e"
	cat >"$OUT/$e.yaml" <<EOF
description: NetworkPolicy cost, enforcer $e on cluster $name beside a one-node $mode lab with provider $prov
modes: [$mode]
tests: [$TESTS]
sweep:
  policies: [$COUNTS]
duration: $DURATION
repeat: $REPEAT
cpu_affinity: auto
profile: true
kube:
  cluster: $name
  lab: true
  paths: [pod]
  placements: [same-node]
EOF
	# shellcheck disable=SC2086 # up holds several flags
	"$BIN" kube up --name "$name" $up
	up=$name
	if [ "$CELLS" = 1 ]; then
		echo "machine load before $e's run: $(uptime)"
		"$BIN" kube run -f "$OUT/$e.yaml" -o "$OUT/$e.json" --report "$OUT/$e-report"
		echo "machine load after $e's run: $(uptime)"
	fi
	if [ "$APPLY" = 1 ]; then
		counts=$APPLY_COUNTS changes=$CHANGES slow=""
		[ "$e" = kube-router ] && counts=$KR_APPLY_COUNTS
		[ "$e" = cilium ] && changes=$CILIUM_CHANGES slow="--change-timeout 60s"
		for n in $counts; do
			echo "apply latency, $e, $n policies; machine load: $(uptime)"
			# shellcheck disable=SC2086 # slow holds a flag and its value, or nothing
			"$BIN" kube converge --cluster "$name" --policy --extra-policies "$n" --changes "$changes" $slow \
				-o "$OUT/$e-apply-$n.json" 2>/dev/null
		done
	fi
	"$BIN" kube down "$name"
	up=""
done

[ "$CELLS" = 1 ] || exit 0
base=$(echo "$COUNTS" | cut -d, -f1)
echo
echo "the cost of NetworkPolicy on a cluster beside the lab ($OUT): each count's median over the same side's at policies=$base [bootstrap 95% CI]"
for e in $ENFORCERS; do
	config "$e"
	for test in $(echo "$TESTS" | tr , ' '); do
		for n in $(echo "$COUNTS" | tr , ' '); do
			[ "$n" = "$base" ] && continue
			echo "$e cluster: $("$BIN" ratio "$OUT/$e.json" "$name/pod@same-node{policies=$n}/$test" "$name/pod@same-node{policies=$base}/$test" 2>&1)"
			echo "$e lab:     $("$BIN" ratio "$OUT/$e.json" "$mode/pod:$prov{policies=$n}/$test" "$mode/pod:$prov{policies=$base}/$test" 2>&1)"
		done
		echo "$e $test, the enforcer's CPU (each line's cell at N against N=$base):"
		"$BIN" explain "$OUT/$e.json" --knob policies --test "$test" | grep -E '^(tcp_|udp_)|^NetworkPolicy enforcer' || true
	done
done
