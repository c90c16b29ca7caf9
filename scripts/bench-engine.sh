#!/bin/sh
# The built-in rr engine against C references (issue 16's engine rows): on one
# veth-routed lab, client and server pinned to one CPU, interleaved rounds,
# one line per row with the ratio built-in / reference and its bootstrap 95% CI:
#
#   engine tcp_rr / sockperf  0.950 [0.930, 0.970]  target >= 0.98  SHORT
#   engine tcp_crr / C reference  0.990 [0.970, 1.010]  target >= 0.98  UNRESOLVED
#
# It builds a lab: run it under the machine's lab lock, e.g.
#   flock -o /tmp/vnetlab-labs.lock scripts/bench-engine.sh [--repeat 7] [--duration 2s] [--cpu 1] [--rows rr,crr]
# The C reference (tools/crr-ref/crr.c) is compiled with cc into
# ${XDG_CACHE_HOME:-~/.cache}/vnetlab/crr-ref/ when its source changes; it is not part of make build.
set -eu
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vnetlab/crr-ref"
mkdir -p "$cache"
src=tools/crr-ref/crr.c
sum=$(sha256sum "$src" | cut -c1-16)
ref="$cache/crr-$sum"
if [ ! -x "$ref" ]; then
	${CC:-cc} -O2 -Wall -o "$ref.tmp" "$src"
	mv "$ref.tmp" "$ref"
fi
bin="${VNETLAB_BIN:-}"
if [ -z "$bin" ]; then
	go build -o "$cache/vnetlab" ./cmd/vnetlab
	bin="$cache/vnetlab"
fi
go build -o "$cache/bench-engine" ./tools/bench-engine
VNETLAB_BIN="$bin" exec "$cache/bench-engine" --crr-ref "$ref" "$@"
