#!/bin/sh
# The local-cluster table: Service proxies and CNIs on local clusters, from ONE run of
# scenarios/kube-proxies.yaml (each configuration's cluster brought up, measured,
# removed, one after the other), then the table's rows as ratios with their
# bootstrap 95% CI: clusterIP/podIP per configuration, placement and test, and
# tcp_crr with the extra Services. Targets apply to vnetlab's eBPF
# proxy; the other configurations' rows are printed beside them without one.
#
#   make bench-kube                           # build, run (25-30 min here), print the rows
#   REPEAT=3 scripts/bench-kube.sh            # fewer samples per cell
#   DURATION=2s scripts/bench-kube.sh         # shorter samples (the file says 3s)
#   RESULTS=old.json scripts/bench-kube.sh    # print the rows of an earlier run again
#   OUT=after.json REPORT=dir scripts/bench-kube.sh
set -eu
cd "$(dirname "$0")/.."
BIN=${VNETLAB_BIN:-bin/vnetlab}
if [ -n "${RESULTS:-}" ]; then
	OUT=$RESULTS
else
	OUT=${OUT:-kube-proxies.json}
	REPORT=${REPORT:-kube-proxies-report}
	echo "machine load before the run: $(uptime)"
	# --cpu-affinity auto: tcp_rr/tcp_crr client and server pinned to one CPU
	# (the clusters are local, their pods run on this machine's CPUs).
	"$BIN" kube run -f scenarios/kube-proxies.yaml --cpu-affinity auto ${REPEAT:+--repeat "$REPEAT"} ${DURATION:+--duration "$DURATION"} -o "$OUT" --report "$REPORT"
	echo "machine load after the run: $(uptime)"
fi

row() { "$BIN" ratio "$OUT" "$@" || true; }
name='def name: "\(.mode)/\(.path)\(if .provider != "" or (.extra_services // 0) > 0 then "(\(.provider)\(if (.extra_services // 0) > 0 then "+\(.extra_services)" else "" end))" else "" end)@\(.placement)/\(.test)";'
echo
echo "Service proxies and CNIs on local clusters ($OUT, CPU affinity $(jq -r .metadata.settings.cpu_affinity "$OUT")): ratio of medians [bootstrap 95% CI]; MET/SHORT when the whole CI is on one side of the target"
echo "clusterIP/podIP per configuration, placement and test (with N extra Services: over the pod cell measured in the same rounds with them present):"
# Every service cell over its pod cell; the table's targets on vnetlab's proxies' tcp_crr.
jq -r "$name"'.cells[] | select(.path == "service") |
	[name, (.path = "pod" | .provider = "" | name),
	 (if (.provider | startswith("vnetlab")) and .test == "tcp_crr" then (if (.extra_services // 0) > 0 then ">=0.95" else ">=0.97" end) else "" end)] | @tsv' "$OUT" |
	while IFS="$(printf '\t')" read -r num den target; do
		if [ -n "$target" ]; then row "$num" "$den" --target "$target"; else row "$num" "$den"; fi
	done
echo
echo "each configuration's clusterIP tcp_crr over the first configuration's (same placement; different clusters, measured one after the other):"
jq -r "$name"'[.cells[] | select(.path == "service" and .test == "tcp_crr")] as $s | ($s[0].mode) as $base |
	$s[] | select(.mode != $base) | . as $c |
	[name, ($s[] | select(.mode == $base and .placement == $c.placement and (.extra_services // 0) == ($c.extra_services // 0)) | name)] |
	select(length == 2) | @tsv' "$OUT" |
	while IFS="$(printf '\t')" read -r num den; do row "$num" "$den"; done
