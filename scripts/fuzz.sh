#!/usr/bin/env bash
# Runs every Go fuzz target of the module in turn (func FuzzXxx in a
# package's fuzz_test.go), each for FUZZTIME, and prints per target its
# exec count; for a target that fails, the input Go kept under the
# package's testdata/fuzz/ and the one command that runs it again.
#
#   scripts/fuzz.sh                          every target, 10m each
#   FUZZTIME=30s scripts/fuzz.sh             every target, 30 s each
#   FUZZTIME=3s scripts/fuzz.sh ./internal/results/   the targets of some packages
#
# Env: FUZZTIME (go test -fuzztime: a duration, or Nx for N execs; default
# 10m), FUZZMINIMIZETIME (go test -fuzzminimizetime, default 1s: Go
# minimizes every new interesting input too, up to a minute each by
# default, and a large seed such as a results file then takes the whole
# run), FUZZFLAGS (more go test flags, e.g. "-parallel 1"), GO (default go).
# Exit status 1 when a target failed (each target runs either way).
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10m}
minimizetime=${FUZZMINIMIZETIME:-1s}
go=${GO:-go}
read -r -a flags <<<"${FUZZFLAGS:-}"

# Packages: those given, else every directory with a fuzz_test.go.
if (($#)); then
	dirs=("$@")
else
	mapfile -t dirs < <(find . -name fuzz_test.go -not -path './.git/*' -printf '%h\n' | sort -u)
fi

failed=0 total=0 start=$SECONDS
summary=()
for dir in "${dirs[@]}"; do
	dir=./${dir#./}
	dir=${dir%/}
	# The targets: go test -list names what the package really has.
	if ! targets=$("$go" test -list '^Fuzz' "$dir" 2>&1); then
		echo "$dir: does not build:"
		echo "$targets"
		failed=1
		continue
	fi
	for name in $(grep '^Fuzz' <<<"$targets"); do
		total=$((total + 1))
		t0=$SECONDS
		out=$("$go" test "${flags[@]}" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" "$dir" 2>&1)
		code=$?
		# "fuzz: elapsed: 30s, execs: 123456 (4115/sec), new interesting: ..."
		execs=$(grep -o 'execs: [0-9]*' <<<"$out" | tail -1 | cut -d' ' -f2)
		line=$(printf '%-44s %-22s execs %-10s %ss' "$dir" "$name" "${execs:-0}" $((SECONDS - t0)))
		if ((code == 0)); then
			echo "$line  ok"
			summary+=("$line  ok")
			continue
		fi
		# Go's coordinator can report its own -fuzztime deadline as a
		# failure (a race of its own, fixed in Go 1.27): no input failed.
		if ! grep -q 'Failing input written' <<<"$out" && grep -q '^    context deadline exceeded$' <<<"$out"; then
			echo "$line  ok (go's fuzz coordinator timed out at -fuzztime: no input failed)"
			summary+=("$line  ok")
			continue
		fi
		failed=1
		echo "$line  FAILED"
		summary+=("$line  FAILED")
		echo "$out" | grep -v '^fuzz: elapsed' | sed 's/^/    /'
		if input=$(grep -o 'testdata/fuzz/[^ ]*' <<<"$out" | tail -1) && [[ -n $input ]]; then
			echo "    input kept: $dir/$input"
			echo "    reproduce:  $go test -run '$name/$(basename "$input")' $dir"
		fi
	done
done
echo
echo "fuzz: $total targets, ${fuzztime} each, $((SECONDS - start))s in all"
printf '%s\n' "${summary[@]}"
exit $failed
