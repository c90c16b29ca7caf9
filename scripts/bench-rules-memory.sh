#!/bin/sh
# The kernel memory of kube-proxy's rules on a node of a local cluster (the network programming table's memory
# comparison). vnetlab's proxies keep their state in eBPF maps, whose memory `kube converge`
# records (the maps' memlock); kube-proxy keeps it in nftables objects (its iptables mode
# too: iptables-nft), which no process's RSS shows. The node's rules (nftables mode: the
# tables ip and ip6 kube-proxy; iptables mode: iptables-save and ip6tables-save) are loaded
# again into a network namespace of the script's own by a process in a memory cgroup of its
# own, and the kernel memory charged to that cgroup is read (cgroup v1's
# memory.kmem.usage_in_bytes), minus the same for an empty table; REPEATS times. The kernel
# charges nftables objects and eBPF maps alike to the cgroup of the process that made them
# (an eBPF hash map made so is charged exactly its memlock), so the two compare.
#
# Usage (on a cluster made by `vnetlab kube up --proxy nftables|iptables`, under the lock):
#   flock /run/vnetlab-dev.lock scripts/bench-rules-memory.sh CLUSTER [NODE] [REPEATS]
#   NODE: the node's name (default CLUSTER-node1); REPEATS: 3
# It prints one line per repeat and the median, and removes its namespace and cgroup.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh
[ $# -ge 1 ] || { echo "usage: scripts/bench-rules-memory.sh CLUSTER [NODE] [REPEATS] (see --help)" >&2; exit 2; }
cluster=$1 node=${2:-$1-node1} reps=${3:-3}
netns=vnl-$node
ip netns exec "$netns" true 2>/dev/null || { echo "no network namespace $netns: is $node a node of local cluster $cluster (vnetlab kube ls)?" >&2; exit 2; }
self=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
parent=/sys/fs/cgroup/memory$self
[ -n "$self" ] && [ -f "$parent/memory.kmem.usage_in_bytes" ] || { echo "this script reads cgroup v1's memory.kmem.usage_in_bytes, and this machine has no v1 memory controller for this process" >&2; exit 2; }
work=$(mktemp -d)
scratch=vnl-kmem-$$
cg=$parent/$scratch
cleanup() {
	ip netns del "$scratch" 2>/dev/null || true
	for _ in $(seq 60); do [ -d "$cg" ] || break; rmdir "$cg" 2>/dev/null && break; sleep 1; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
if ip netns exec "$netns" nft list table ip kube-proxy >"$work/rules" 2>/dev/null; then
	mode=nftables
	ip netns exec "$netns" nft list table ip6 kube-proxy >>"$work/rules" 2>/dev/null || true
	echo 'table ip kube-proxy { }' >"$work/empty"
	load="nft -f"
elif ip netns exec "$netns" iptables-save 2>/dev/null | grep -q '^:KUBE-SERVICES'; then
	mode=iptables
	ip netns exec "$netns" iptables-save >"$work/rules"
	ip netns exec "$netns" ip6tables-save >"$work/rules6"
	printf '*filter\nCOMMIT\n' >"$work/empty"
	load="iptables-restore"
else
	echo "no kube-proxy rules on $node (neither nftables' table ip kube-proxy nor iptables' KUBE-SERVICES): a vnetlab proxy's memory is kube converge's BPF maps column" >&2
	exit 2
fi
# kmem FILE [FILE6]: the kernel memory loading the rules took, in a fresh namespace and cgroup
kmem() {
	mkdir "$cg"
	ip netns add "$scratch"
	then6=""
	[ -n "${2:-}" ] && then6="&& ip6tables-restore $2"
	sh -c "echo \$\$ >$cg/cgroup.procs && exec ip netns exec $scratch sh -c '$load $1 $then6'" >&2
	cat "$cg/memory.kmem.usage_in_bytes"
	ip netns del "$scratch"
	for _ in $(seq 60); do rmdir "$cg" 2>/dev/null && return; sleep 1; done
	echo "cgroup $cg still busy after 60 s" >&2
	return 1
}
rules6=""
[ "$mode" = iptables ] && rules6=$work/rules6
echo "kube-proxy ($mode) on $node: $(wc -l <"$work/rules") lines of rules; $(uptime)"
for r in $(seq "$reps"); do
	e=$(kmem "$work/empty")
	f=$(kmem "$work/rules" "$rules6")
	echo "repeat $r: $(((f - e) / 1024)) KiB ($f - $e bytes, the rules less an empty table)"
	echo $((f - e)) >>"$work/sizes"
done
echo "median: $(sort -n "$work/sizes" | awk '{a[NR] = $1} END {printf "%.1f MiB", a[int((NR + 1) / 2)] / 1048576}') of kernel memory for $node's rules"
