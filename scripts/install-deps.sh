#!/usr/bin/env bash
# Installs what vnetlab needs on Debian 12, only what is missing: Debian
# packages (apt-get) and Go modules (go mod download). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

# program -> Debian package
declare -A need=(
  [iperf3]=iperf3 [sockperf]=sockperf [iptables-restore]=iptables [nft]=nftables
  [ping]=iputils-ping [ethtool]=ethtool [tc]=iproute2 [ip]=iproute2 [conntrack]=conntrack
  [ovs-vswitchd]=openvswitch-switch [bpftool]=bpftool
  [ipset]=ipset  # the iptables NetworkPolicy provider's peer sets, and kube-router's (internal/platform/labpolicy)
  [chromium]=chromium  # the report's HTML is checked in a real headless browser (internal/present/report tests)
  # `vnetlab kube up`: a local Kubernetes cluster's etcd, container runtime and CNI plugins
  [etcd]=etcd-server [containerd]=containerd [runc]=runc
  # `make conformance` / `vnetlab kube conformance`: the tools upstream's agnhost test image holds
  [nc.openbsd]=netcat-openbsd [curl]=curl [wget]=wget [ss]=iproute2 [dash]=dash
  # and its glibc-dns-testing (formerly jessie-dnsutils) image, the DNS specs' querier
  [dig]=bind9-dnsutils [nslookup]=bind9-dnsutils [host]=bind9-host [getent]=libc-bin [hostname]=hostname
  # e2e/kernels boots Debian's stock kernel under qemu with these programs in its initramfs
  [qemu-system-x86_64]=qemu-system-x86 [busybox]=busybox-static [depmod]=kmod [xz]=xz-utils
  # `kube up --cni cilium` (make test's Cilium smoke): its agent compiles its datapath with clang 19
  [clang-19]=clang-19
)
missing=()
for prog in "${!need[@]}"; do
  command -v "$prog" >/dev/null 2>&1 || [ -x "/usr/sbin/$prog" ] || missing+=("${need[$prog]}")
done
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
# A font for chromium to draw the report's text with (minimal images have none).
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  echo "installing Debian packages: $pkgs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  # openvswitch-switch's postinst may start the system's OVS daemons; vnetlab runs its
  # own in a private directory and never uses the system's.
fi

if ! command -v go >/dev/null 2>&1; then
  echo "Go 1.26 or newer is needed (https://go.dev/doc/install); Debian 12's golang package is too old" >&2
  exit 1
fi
go mod download
