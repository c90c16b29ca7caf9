#!/bin/sh
# The network programming latency table and chart: network programming latency, from a change written through
# the API to the first packet that shows it, per Service proxy and per number N of other
# Services (E endpoints each), with each proxy's own metric beside it, the proxies', API
# server's and etcd's CPU and memory, the eBPF maps' memory and tcp_crr to the newest
# Service as a ratio to N = 0. Per proxy: a 2-node local cluster (kube up), then for each E
# and each N in increasing order one `kube converge --keep-extra` (the N Services kept
# between steps: each step makes only the difference), then the cluster goes. Each step
# takes /run/vnetlab-dev.lock for itself and says how long it held it. An N that the
# cluster's API server and etcd cannot hold is refused before anything is made (said in
# the log, the row missing). Last, `kube converge-report` prints the table and writes
# the chart (p99 of endpoint-added against N, log axes).
#
#   make bench-converge                       # every proxy, N 0..100k, E 1 and 10, 1000 changes: days
#
# Time: creating N Services grows as N squared on Kubernetes 1.37 (the API server's ClusterIP
# allocator counts every allocated address twice per Service: about 2.2 µs more per Service
# present on this 2-CPU machine), so 30,000 take about 13 minutes and 100,000 about 3 hours;
# kube-proxy steps take about 20 minutes per 1,000 changes (its syncs wait about a second).
# kube-proxy iptables does not fit 30,000 Services of 10 endpoints here: its first sync ran
# more than 5 minutes (nftables' took 4), and each change would cost a sync of minutes: leave it out at E = 10.
#   PROXIES="vnetlab-ebpf iptables" NS="0 1000 10000" ES=1 CHANGES=100 scripts/bench-converge.sh
#   CRR=0 scripts/bench-converge.sh           # without tcp_crr to the newest Service
#   PAUSE=1.5s-2s scripts/bench-converge.sh   # each change alone: past kube-proxy's 1 s minSyncPeriod
#                                             # (the default, 50ms-250ms, makes its changes wait for it)
#   TIMEOUT=60s scripts/bench-converge.sh     # --change-timeout (default 10s): kube-proxy iptables syncs
#                                             # for about 10 s at 30,000 Services (kube converge warns)
#   RESULTS=dir scripts/bench-converge.sh     # the table and chart of an earlier run again
#   SHARED=1 scripts/bench-converge.sh        # one cluster for every proxy (below)
#
# SHARED=1: one 2-node cluster (CLUSTER, default i47sw) of vnetlab's CNI in mode veth-ebpf with
# --network-policy none serves every proxy, so each N is made once, not once per proxy: per E
# and each N in increasing order, every proxy of PROXIES in turn is switched in (`kube
# set-proxy`, which cleans the previous proxy's state off the nodes and waits for the new one's
# first sync) and measured (`kube converge --keep-extra`), then the first proxy again (its files
# end -again: the drift between the first and the last run of an N; kube converge-report names
# it "run 2"). The first run of an N makes the new Services, under the first proxy; the others
# reuse them, and kube converge-report shows - for their CPU while N was made (their proxy's
# first sync made them, during the switch; set-proxy prints it). The files are named
# PROXY-shared-eE-nN, in OUT converge-bench-shared by default; the kube-proxy rows run on
# veth-ebpf here, not on Debian's bridge as in the per-proxy clusters (the report tells them
# apart: "on veth-ebpf"). The cluster goes at the end, also on an error or Ctrl-C.
#
# PROXIES: iptables nftables vnetlab-ebpf vnetlab-ebpf+socket-lb vnetlab-sock (the default: all), and
# cilium (Cilium's CNI and kube-proxy replacement, built on first use; not with SHARED=1).
# OUT (converge-bench, or converge-bench-shared): the directory of the files, the table (table.txt) and chart (converge.svg).
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
LOCK=${LOCK:-/run/vnetlab-dev.lock}
shared=""
[ "${SHARED:-0}" = 1 ] && shared=-shared
OUT=${RESULTS:-${OUT:-converge-bench$shared}}
if [ -z "${RESULTS:-}" ]; then
	PROXIES=${PROXIES:-"iptables nftables vnetlab-ebpf vnetlab-ebpf+socket-lb vnetlab-sock"}
	[ -n "$(echo $PROXIES)" ] || { echo "PROXIES is empty: name at least one (iptables nftables vnetlab-ebpf vnetlab-ebpf+socket-lb vnetlab-sock)" >&2; exit 2; }
	NS=${NS:-"0 1000 10000 30000 100000"}
	ES=${ES:-"1 10"}
	CHANGES=${CHANGES:-1000}
	CRR=${CRR:-3s}
	PAUSE=${PAUSE:-50ms-250ms}
	TIMEOUT=${TIMEOUT:-10s}
	tag=""
	[ "$PAUSE" = 50ms-250ms ] || tag="-p$PAUSE"
	mkdir -p "$OUT"
	locked() { # run "$@" under the lock, saying how long it held it
		flock "$LOCK" sh -c 't0=$(date +%s); "$@"; rc=$?; echo "lock held $(( $(date +%s) - t0 )) s: $*" >&2; exit $rc' locked "$@"
	}
	up="" # the cluster up now: it goes on an error or Ctrl-C too
	trap '[ -z "$up" ] || locked "$bin" kube down "$up" >&2' EXIT
	trap 'exit 130' INT TERM
	echo "machine load before: $(uptime)"
	proxy_args() { # set-proxy's flags for a name of PROXIES
		case $1 in
		iptables | nftables | vnetlab-ebpf | vnetlab-sock) echo "--proxy $1" ;;
		vnetlab-ebpf+socket-lb) echo "--proxy vnetlab-ebpf --socket-lb" ;;
		cilium) echo "cilium is its own CNI, which set-proxy cannot switch in: run it without SHARED=1" >&2; exit 2 ;;
		*) echo "unknown proxy $1 (use iptables nftables vnetlab-ebpf vnetlab-ebpf+socket-lb vnetlab-sock)" >&2; exit 2 ;;
		esac
	}
	if [ "${SHARED:-0}" = 1 ]; then
		name=${CLUSTER:-i47sw}
		# shellcheck disable=SC2086
		set -- $PROXIES
		first=$1
		for p in $PROXIES; do proxy_args "$p" >/dev/null || exit 2; done
		# shellcheck disable=SC2046
		up=$name
		locked "$bin" kube up --name "$name" --nodes 2 --cni vnetlab --cni-mode veth-ebpf --network-policy none $(proxy_args "$first")
		for e in $ES; do
			for n in $NS; do
				for p in $PROXIES "$first again"; do
					again=""
					case $p in *" again") p=$first again="-again" ;; esac
					f="$OUT/$p-shared-e$e-n$n$tag$again"
					echo "== shared $name: $p$again, N=$n, E=$e, pause $PAUSE: $(uptime)"
					# shellcheck disable=SC2046
					if ! locked "$bin" kube set-proxy --cluster "$name" $(proxy_args "$p") >"$f.switch.txt" 2>&1; then
						echo "$p N=$n E=$e: set-proxy failed (see $f.switch.txt)"
						continue
					fi
					locked "$bin" kube converge --cluster "$name" --extra-services "$n" --extra-endpoints "$e" --keep-extra \
						--changes "$CHANGES" --pause "$PAUSE" --change-timeout "$TIMEOUT" --crr "$CRR" -o "$f.json" >"$f.txt" || echo "$p N=$n E=$e: failed (see above)"
				done
			done
		done
		locked "$bin" kube down "$name"
		up=""
		PROXIES="" # done: no cluster per proxy
	fi
	for p in $PROXIES; do
		case $p in
		iptables) name=i47ipt args="--proxy $p" ;;
		nftables) name=i47nft args="--proxy $p" ;;
		vnetlab-ebpf) name=i47ebpf args="--cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf" ;;
		vnetlab-ebpf+socket-lb) name=i47slb args="--cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-ebpf --socket-lb" ;;
		vnetlab-sock) name=i47sock args="--cni vnetlab --cni-mode veth-ebpf --proxy vnetlab-sock" ;;
		cilium) name=i47cil args="--cni cilium --proxy cilium" ;;
		*) echo "unknown proxy $p (use iptables nftables vnetlab-ebpf vnetlab-ebpf+socket-lb vnetlab-sock cilium)" >&2; exit 2 ;;
		esac
		up=$name
		# shellcheck disable=SC2086
		locked "$bin" kube up --name "$name" --nodes 2 $args
		for e in $ES; do
			for n in $NS; do
				f="$OUT/$p-e$e-n$n$tag"
				echo "== $p, N=$n, E=$e, pause $PAUSE: $(uptime)"
				locked "$bin" kube converge --cluster "$name" --extra-services "$n" --extra-endpoints "$e" --keep-extra \
					--changes "$CHANGES" --pause "$PAUSE" --change-timeout "$TIMEOUT" --crr "$CRR" -o "$f.json" >"$f.txt" || echo "$p N=$n E=$e: failed (see above)"
			done
		done
		locked "$bin" kube down "$name"
		up=""
	done
	echo "machine load after: $(uptime)"
fi
"$bin" kube converge-report "$OUT"/*.json --svg "$OUT/converge.svg" | tee "$OUT/table.txt"
echo "chart: $OUT/converge.svg"
