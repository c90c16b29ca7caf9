#!/usr/bin/env bash
# Runs every Go fuzz target of the module in turn (func FuzzXxx in a
# package's fuzz_test.go), each for FUZZTIME, and prints per target its
# exec count; for a target that fails, the input Go kept under the
# package's testdata/fuzz/ and the one command that runs it again.
#
#   scripts/fuzz.sh                          every target, 10m each
#   FUZZTIME=30s scripts/fuzz.sh             every target, 30 s each
#   FUZZTIME=3s scripts/fuzz.sh ./internal/results/   the targets of some packages
#   scripts/fuzz.sh --build DIR              only build each package's fuzzing
#                                            test binary into DIR (no fuzzing)
#   FUZZBIN=DIR scripts/fuzz.sh              fuzz with the binaries in DIR
#
# Fuzzing builds every package and its dependencies again, instrumented for
# coverage: minutes on an empty build cache. `make test` builds them with
# --build in the background while the suite runs, then fuzzes with FUZZBIN.
#
# Env: FUZZTIME (go test -fuzztime: a duration, or Nx for N execs; default
# 10m), FUZZMINIMIZETIME (go test -fuzzminimizetime, default 1s: Go
# minimizes every new interesting input too, up to a minute each by
# default, and a large seed such as a results file then takes the whole
# run), FUZZFLAGS (more go test flags, e.g. "-parallel 1"; with FUZZBIN
# given to the binary as its -test. flags), GO (default go).
# Exit status 1 when a target failed (each target runs either way).
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10m}
minimizetime=${FUZZMINIMIZETIME:-1s}
go=${GO:-go}
read -r -a flags <<<"${FUZZFLAGS:-}"
build=
if [[ ${1:-} == --build ]]; then
	build=${2:?usage: scripts/fuzz.sh --build DIR [PACKAGE...]}
	shift 2
	mkdir -p "$build"
fi
bin=${FUZZBIN:-}

# Packages: those given, else every directory with a fuzz_test.go.
if (($#)); then
	dirs=("$@")
else
	mapfile -t dirs < <(find . -name fuzz_test.go -not -path './.git/*' -printf '%h\n' | sort -u)
fi

failed=0 total=0 start=$SECONDS
summary=()
# binname: the file a package's fuzzing test binary has under --build's DIR.
binname() { local d=${1#./}; echo "${d//\//_}.test"; }

for dir in "${dirs[@]}"; do
	dir=./${dir#./}
	dir=${dir%/}
	if [[ -n $build ]]; then
		# -fuzz at build time instruments the binary; it fuzzes any target of the package.
		if ! out=$("$go" test -c -fuzz . -o "$build/$(binname "$dir")" "$dir" 2>&1); then
			echo "$dir: does not build:"
			echo "$out"
			failed=1
		fi
		continue
	fi
	exe=
	if [[ -n $bin ]]; then
		exe=$(realpath "$bin/$(binname "$dir")")
		cache=$("$go" env GOCACHE)/fuzz/$("$go" list "$dir")
	fi
	# The targets: -list names what the package really has.
	if [[ -n $exe ]]; then
		targets=$(cd "$dir" && "$exe" -test.list '^Fuzz' 2>&1)
	else
		targets=$("$go" test -list '^Fuzz' "$dir" 2>&1)
	fi
	if (($?)); then
		echo "$dir: does not build:"
		echo "$targets"
		failed=1
		continue
	fi
	for name in $(grep '^Fuzz' <<<"$targets"); do
		total=$((total + 1))
		t0=$SECONDS
		if [[ -n $exe ]]; then
			out=$(cd "$dir" && "$exe" "${flags[@]/#-/-test.}" -test.run '^$' -test.fuzz "^$name\$" -test.fuzztime "$fuzztime" \
				-test.fuzzminimizetime "$minimizetime" -test.fuzzcachedir "$cache" 2>&1)
		else
			out=$("$go" test "${flags[@]}" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" "$dir" 2>&1)
		fi
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
if [[ -n $build ]]; then
	echo "fuzz: built ${#dirs[@]} packages' fuzzing binaries into $build in $((SECONDS - start))s"
	exit $failed
fi
echo
echo "fuzz: $total targets, ${fuzztime} each, $((SECONDS - start))s in all"
printf '%s\n' "${summary[@]}"
exit $failed
