package vm

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// GuestPrograms are the programs vnetlab and its tests run, copied from this
// machine with their libraries. kmod's names load modules on demand (the
// kernel calls /sbin/modprobe).
var GuestPrograms = []string{
	"bash", "busybox", "ip", "tc", "ping", "iperf3", "sockperf", "ethtool", "nft", "conntrack",
	"iptables", "iptables-restore", "iptables-save", "iptables-nft", "iptables-nft-restore",
	"iptables-nft-save", "ip6tables", "ip6tables-restore", "ip6tables-save", "xtables-nft-multi",
	"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl", "ovs-ofctl", "ovs-dpctl",
	"kmod", "modprobe", "insmod", "rmmod", "lsmod", "modinfo",
}

// GuestFiles are data files and directories the programs read.
var GuestFiles = []string{
	"/usr/lib/x86_64-linux-gnu/xtables", // iptables' match and target plugins
	"/usr/share/openvswitch/vswitch.ovsschema",
	"/etc/iproute2", "/etc/protocols", "/etc/services", "/etc/ethertypes",
}

// GuestModules are the module trees and modules the guest may load (with
// their dependencies): networking, netfilter, Open vSwitch, the virtual
// devices vnetlab builds, and crc32c (libcrc32c's soft dependency).
var GuestModules = []string{
	"kernel/net/", "kernel/drivers/net/ipvlan/", "kernel/drivers/net/vxlan/",
	"veth", "macvlan", "macvtap", "tun", "dummy", "ifb", "geneve", "netkit",
	"crc32c_generic", "crc32c_intel", "libcrc32c",
}

// GuestRun is a test binary the guest runs: `BIN -test.v -test.run RUN`.
type GuestBinary struct {
	Name string // its name in the console markers
	Path string // the binary on this machine (`go test -c`)
	Run  string // -test.run pattern
}

// Guest is what goes into the initramfs besides the kernel's modules.
type Guest struct {
	Vnetlab  string            // this build of vnetlab, installed as /usr/bin/vnetlab
	Binaries []GuestBinary     // run in order
	Env      map[string]string // exported before the runs
	Timeout  string            // each binary's -test.timeout (e.g. "8m")
	Before   []string          // shell commands run first, their output on the console (e.g. vnetlab doctor)
}

// GuestInit is the guest's /init, run by bash (Debian's busybox shell would
// run its own `ip` applet instead of iproute2's). It mounts what vnetlab
// needs, runs each binary between markers and powers off.
func GuestInit(g Guest) string {
	var b strings.Builder
	b.WriteString(`#!/bin/bash
export PATH=/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
echo 3 > /proc/sys/kernel/printk
ip link set lo up
hostname vnetlab-guest
# Device nodes whose modules load on first open (/dev/net/tun), as
# systemd-tmpfiles makes them on a booted system (modules.devname).
while read -r _ path dev; do
  case "$dev" in c*:*) dev=${dev#c}; [ -e "/dev/$path" ] && continue; mkdir -p "/dev/${path%/*}"; mknod -m 0666 "/dev/$path" c "${dev%%:*}" "${dev##*:}" ;; esac
done < "/lib/modules/$(uname -r)/modules.devname"
# Loaded on hosts that run Docker or Kubernetes; bridge mode needs it.
modprobe br_netfilter
modprobe crc32c
echo "vnetlab guest: kernel $(uname -r), $(nproc) CPUs"
cd /root
`)
	keys := make([]string, 0, len(g.Env))
	for k := range g.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%q\n", k, g.Env[k])
	}
	for _, c := range g.Before {
		fmt.Fprintf(&b, "echo %s\n%s 2>&1\n", shellQuote("# "+c), c)
	}
	for _, bin := range g.Binaries {
		fmt.Fprintf(&b, "echo %s %s\n", MarkBegin, bin.Name)
		fmt.Fprintf(&b, "/guest/%s -test.v -test.count=1 -test.timeout=%s -test.run %q 2>&1\n", bin.Name, g.Timeout, bin.Run)
		fmt.Fprintf(&b, "echo %s %s exit=$?\n", MarkEnd, bin.Name)
	}
	b.WriteString("poweroff -f\n")
	return b.String()
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// BuildGuest writes the guest's initramfs: programs, data files, modules,
// vnetlab, the test binaries and /init.
func BuildGuest(k *Kernel, g Guest, w io.Writer) error {
	r := NewInitramfs()
	for _, name := range GuestPrograms {
		p, err := exec.LookPath(name)
		if err != nil {
			if p, err = exec.LookPath("/usr/sbin/" + name); err != nil {
				return fmt.Errorf("guest program %s is not installed here (scripts/install-deps.sh installs it)", name)
			}
		}
		if err := r.Program(p); err != nil {
			return err
		}
	}
	for _, f := range GuestFiles {
		fi, err := os.Stat(f)
		if err != nil {
			continue // optional data (e.g. /etc/ethertypes)
		}
		if !fi.IsDir() {
			if err := r.File(canonical(f), f); err != nil {
				return err
			}
			continue
		}
		if err := r.Tree(f); err != nil {
			return err
		}
		if strings.Contains(f, "xtables") {
			plugins, _ := filepath.Glob(filepath.Join(f, "*.so"))
			for _, p := range plugins {
				if err := r.Library(p); err != nil {
					return err
				}
			}
		}
	}
	r.addBusybox()
	r.Data("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	r.Data("/etc/group", []byte("root:x:0:\n"), 0o644)
	r.Data("/etc/hosts", []byte("127.0.0.1 localhost\n"), 0o644)
	r.Data("/etc/resolv.conf", nil, 0o644) // no network; OVS warns when it is missing
	if _, err := r.Modules(k, GuestModules); err != nil {
		return err
	}
	if err := r.Library(g.Vnetlab); err != nil {
		return err
	}
	r.entries[clean("/usr/bin/vnetlab")] = r.entries[clean(canonical(g.Vnetlab))]
	delete(r.entries, clean(canonical(g.Vnetlab)))
	for _, bin := range g.Binaries {
		if err := r.Library(bin.Path); err != nil {
			return err
		}
		r.entries[clean("/guest/"+bin.Name)] = r.entries[clean(canonical(bin.Path))]
		delete(r.entries, clean(canonical(bin.Path)))
	}
	r.Data("/init", []byte(GuestInit(g)), 0o755)
	return r.Write(w)
}

// addBusybox links busybox's applets (mount, poweroff, ...) where no real
// program of the same name is.
func (r *Initramfs) addBusybox() {
	out, err := exec.Command("busybox", "--list").Output()
	if err != nil {
		return
	}
	for _, a := range strings.Fields(string(out)) {
		if r.Has("/usr/bin/"+a) || r.Has("/usr/sbin/"+a) {
			continue
		}
		r.Symlink("/usr/bin/"+a, "busybox")
	}
}
