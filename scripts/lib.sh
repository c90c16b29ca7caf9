# Sourced by the benchmark scripts, with their arguments: prints the script's
# header comment and exits on -h/--help; otherwise prepares its cache folder
# ${XDG_CACHE_HOME:-~/.cache}/vnetlab/NAME (NAME: the script's without
# .sh) as $cache, and the vnetlab it measures as $bin: VNETLAB_BIN, or built
# from this tree as make build builds it.
for a in "$@"; do
	case $a in -h | -help | --help)
		sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	esac
done
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vnetlab/$(basename "$0" .sh)"
mkdir -p "$cache"
bin="${VNETLAB_BIN:-}"
if [ -z "$bin" ]; then
	CGO_ENABLED=0 go build -o "$cache/vnetlab" ./cmd/vnetlab # as make build
	bin="$cache/vnetlab"
fi
