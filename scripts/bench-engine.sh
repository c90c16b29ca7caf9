#!/bin/sh
# The built-in rr engine against C references (the engine rows of the eBPF data-path table): on one
# veth-routed lab, client and server pinned to one CPU, interleaved rounds (the
# order alternates each round), one line per row with the ratio of the medians
# built-in / reference, its bootstrap 95% CI and the eBPF data-path table's target, and the
# machine's load averages before and after:
#
#   engine tcp_rr / C reference  0.990 [0.975, 1.004]  target >= 0.98  UNRESOLVED
#   engine udp_rr / C reference  ...
#   engine tcp_crr / C reference  ...
#
# Rows (--rows, comma-separated; default rr,udp,crr):
#   rr        tcp_rr  against tools/rr-ref/rr.c tcp  (netperf's TCP_RR loop, 1 byte each way)
#   udp       udp_rr  against tools/rr-ref/rr.c udp  (netperf's UDP_RR loop, 1 byte each way)
#   crr       tcp_crr against tools/crr-ref/crr.c    (connect, 1 byte each way, close with RST)
#   sockperf  tcp_rr  against sockperf ping-pong     (14-byte messages, sockperf's minimum)
#   netperf, netperf-udp
#             tcp_rr and udp_rr against netperf's TCP_RR and UDP_RR (netperf and netserver on PATH)
#   rr-client, rr-server, udp-client, udp-server
#             the engine's client (or server) with rr.c's server (client), against
#             rr.c on both sides: which half of the engine costs
#
# Usage (it builds a lab: run it under the machine's lock):
#   flock /run/vnetlab-dev.lock scripts/bench-engine.sh [--repeat 7] [--duration 2s] [--cpu N] [--rows rr,udp,crr]
#   scripts/bench-engine.sh --help
# VNETLAB_BIN: the vnetlab whose engine is measured (default: built from this tree).
# The C references are compiled with cc -O2 into
# ${XDG_CACHE_HOME:-~/.cache}/vnetlab/bench-engine/ when their source changes;
# they are not part of make build.
set -eu
cd "$(dirname "$0")/.."
. scripts/lib.sh

# compile SRC NAME: prints the path of the binary built from SRC's current
# text and the header the references share (tools/rr-ref/ref.h).
compile() {
	out="$cache/$2-$(cat "$1" tools/rr-ref/ref.h | sha256sum | cut -c1-16)"
	if [ ! -x "$out" ]; then
		${CC:-cc} -O2 -Wall -o "$out.tmp" "$1"
		mv "$out.tmp" "$out"
	fi
	echo "$out"
}
rr_ref=$(compile tools/rr-ref/rr.c rr)
crr_ref=$(compile tools/crr-ref/crr.c crr)
go build -o "$cache/bench-engine" ./tools/bench-engine
VNETLAB_BIN="$bin" exec "$cache/bench-engine" --rr-ref "$rr_ref" --crr-ref "$crr_ref" "$@"
