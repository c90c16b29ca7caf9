#!/usr/bin/env bash
# Lab build and teardown at scale: for each mode and pod count, times
# `vnetlab up --pods N` and `vnetlab down` and counts what is left
# (namespaces, state directory, bpffs pins). down returns once the
# namespaces are unmounted; the kernel frees them in the background, so
# before the next case the script waits until the machine's count of
# network namespaces is back where it was, or stops falling ("settle s", a
# machine-wide and so approximate view of that background work).
#
#   scripts/bench-up.sh                      every mode x 200 1000 5000 pods
#   PODS="200 1000" scripts/bench-up.sh bridge veth-routed
#
# A mode that cannot hold N pods (a Linux bridge has at most 1024 ports) or
# that this kernel lacks is skipped with vnetlab's own reason; a build that
# fails is reported as FAILED (exit status 1, as for leftovers). Env: BIN
# (default bin/vnetlab), PODS, CIDR (default 10.128.0.0/16), FAMILY (ipv4,
# ipv6 or dual: --ip-family; a mode without it is skipped with the reason).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-bin/vnetlab}
pods_list=${PODS:-200 1000 5000}
cidr=${CIDR:-10.128.0.0/16}
family=${FAMILY:-ipv4}
name=bench$$
# Modes that join two nodes (their pods alternate between them) and the
# one that attaches no pods.
two_nodes=" host-gw vxlan "
podless=" host "

modes=("$@")
if [ ${#modes[@]} -eq 0 ]; then
	# doctor -o json: the names in its "modes" list.
	mapfile -t modes < <("$bin" doctor -o json | awk '/^  "modes": \[/ { on = 1 } on && /^  \]/ { exit } on' |
		sed -n 's/^ *"name": "\(.*\)",$/\1/p')
fi

now() { date +%s.%N; }
# Live network namespaces, dying ones included (the kernel's slab count).
netns_count() { awk '$1 == "net_namespace" { print $2 }' /proc/slabinfo; }
# settle waits (up to a minute) until that count is back near $1, what it
# was before up, or has not fallen for 5 s (others' namespaces come and go).
settle() {
	local flat=0 prev cur i
	prev=$(netns_count)
	for i in $(seq 600); do
		cur=$(netns_count)
		[ "$cur" -le "$(($1 + 10))" ] && return
		if [ "$cur" -ge "$prev" ]; then flat=$((flat + 1)); else flat=0; fi
		[ "$flat" -ge 50 ] && return
		prev=$cur
		sleep 0.1
	done
}
leftovers() {
	local ns state pins
	ns=$(ip netns list | grep -c "^vnl-$name-")
	state=$(ls /run/vnetlab/labs 2>/dev/null | grep -cx "$name")
	pins=$(ls /sys/fs/bpf/vnetlab 2>/dev/null | grep -cx "$name")
	echo "$((ns + state + pins))"
}

printf '%-13s %6s %5s %8s %8s %8s %9s\n' mode pods nodes "up s" "down s" "settle s" leftovers
status=0
for mode in "${modes[@]}"; do
	for n in $pods_list; do
		nodes=1
		[[ $two_nodes == *" $mode "* ]] && nodes=2
		if [[ $podless == *" $mode "* ]]; then
			printf '%-13s %6s %5s  skip: attaches no pods\n' "$mode" "$n" "-"
			continue
		fi
		before=$(netns_count)
		t0=$(now)
		if ! err=$("$bin" up --name "$name" --mode "$mode" --pods "$n" --nodes "$nodes" --pod-cidr "$cidr" --ip-family "$family" 2>&1 >/dev/null); then
			t1=$(now)
			"$bin" down "$name" >/dev/null 2>&1
			took=$(echo "$t1 - $t0" | bc)
			# Refused before building (bad input, a kernel limit, a missing
			# feature) is a skip; a build that failed is a failure.
			verdict=skip
			if [ "$(echo "$took > 1" | bc)" = 1 ]; then verdict=FAILED status=1; fi
			printf '%-13s %6s %5s  %s (%.1f s): %s\n' "$mode" "$n" "$nodes" "$verdict" "$took" "${err#vnetlab: }"
			continue
		fi
		t1=$(now)
		"$bin" down "$name" >/dev/null || status=1
		t2=$(now)
		settle "$before"
		t3=$(now)
		left=$(leftovers)
		[ "$left" = 0 ] || status=1
		awk -v m="$mode" -v n="$n" -v k="$nodes" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v l="$left" \
			'BEGIN { printf "%-13s %6d %5d %8.2f %8.2f %8.1f %9d\n", m, n, k, b-a, c-b, d-c, l }'
	done
done
exit $status
