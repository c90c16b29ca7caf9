#!/usr/bin/env bash
# Where a run of `make test` spent the machine's CPU: each part's wall time and the CPU
# of its process tree, and the whole machine's busy, idle and stolen CPU over the run. On two
# cores a cold suite is bound by CPU, not by waiting; this says by how much.
#
#   scripts/suite-cpu.sh FILE start          note the machine's CPU counters (/proc/stat)
#   scripts/suite-cpu.sh FILE run PART CMD.. run CMD; its exit status is CMD's
#   scripts/suite-cpu.sh FILE report         print the table
#
# A part's CPU is user + system time of CMD and of every process it waited for
# (compilers, test binaries, qemu). Daemons that leave their parent (a local cluster's
# kubelet and API server) are not in any part: they are in the machine's busy time.
set -uo pipefail
file=$1 verb=$2
shift 2

# ticks: the first line of /proc/stat as busy, idle (with iowait) and stolen clock ticks
# (stolen: the hypervisor ran something else while this machine's CPU had work).
ticks() {
	local _ user nice system idle iowait irq softirq steal
	read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
	echo "$((user + nice + system + irq + softirq)) $((idle + iowait)) $steal"
}

case $verb in
start)
	echo "start $(ticks) $EPOCHSECONDS" >"$file"
	;;
run)
	part=$1
	shift
	TIMEFORMAT="part $part %R %U %S"
	# time's line goes to the file; the command keeps the caller's stderr.
	{ time "$@" 2>&3; } 3>&2 2>>"$file"
	;;
report)
	read -r _ busy0 idle0 steal0 t0 < <(grep '^start ' "$file")
	read -r busy1 idle1 steal1 < <(ticks)
	echo "suite CPU: each part's wall time, and the CPU of its processes and those they waited for"
	grep '^part ' "$file" | awk '{ printf "  %-20s %6.0f s wall %7.0f s CPU\n", $2, $3, $4 + $5 }'
	awk -v hz="$(getconf CLK_TCK)" -v busy=$((busy1 - busy0)) -v idle=$((idle1 - idle0)) -v steal=$((steal1 - steal0)) \
		-v wall=$((EPOCHSECONDS - t0)) -v cpus="$(nproc)" \
		'BEGIN { printf "  %-20s %6d s wall %7.0f s CPU busy, %.0f s idle and %.0f s stolen, of %d CPUs\n", "the machine", wall, busy / hz, idle / hz, steal / hz, cpus }'
	;;
*)
	echo "suite-cpu.sh: unknown verb $verb (start, run or report)" >&2
	exit 2
	;;
esac
