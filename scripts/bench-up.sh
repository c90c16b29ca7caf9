#!/usr/bin/env bash
# Times `vnetlab up --mode bridge --pods 200` and `down`, then checks nothing is left.
set -euo pipefail
cd "$(dirname "$0")/.."
pods=${PODS:-200}
name=bench$$
t0=$(date +%s.%N)
./bin/vnetlab up --name "$name" --mode bridge --pods "$pods" >/dev/null
t1=$(date +%s.%N)
./bin/vnetlab down "$name" >/dev/null
t2=$(date +%s.%N)
left_ns=$(ip netns list | grep -c "^vnl-$name-" || true)
left_state=$(ls /run/vnetlab/labs 2>/dev/null | grep -c "^$name$" || true)
awk -v p="$pods" -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "up   %d pods (bridge): %.2f s\ndown:                %.2f s\n", p, b-a, c-b }'
printf 'leftovers: %d namespaces, %d state dirs\n' "$left_ns" "$left_state"
[ "$left_ns" = 0 ] && [ "$left_state" = 0 ]
