// Package kernels proves vnetlab on a stock distribution kernel: Debian 12's
// 6.12 is booted under qemu with this build of vnetlab and test binaries
// inside an initramfs; each guest test is reported here as a subtest. It
// covers what this machine's kernel cannot run (ipvlan, the Open vSwitch
// kernel datapath, netkit). Under emulation only correctness counts.
package kernels

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/vm"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// guestBinary is a test package run inside the guest and which of its tests
// (a go test -run pattern).
type guestBinary struct{ name, pkg, run string }

// probeTests: the kernel probes; modeTests: the modes this machine's kernel
// lacks, doctor, and the modes it has (on the guest kernel too);
// netkitDataPlane: netkit-ebpf's fast path; ipv6Modes: those modes' IPv6.
var (
	probeTests = guestBinary{"kernel", "./internal/system/kernel", "."}
	modeTests  = guestBinary{"e2e", "./e2e", "^(TestIpvlanKnownButGated|TestKernelModes|TestModesConnectivityAndStream|TestDoctorSaysWhenEmulated)$"}
	// netkit-ebpf's fast path taken (the node's FORWARD chain stays still).
	netkitDataPlane = guestBinary{"dataplane", "./internal/datapath/tcbpf", "^TestNetkitEBPFLab$"}
	// IPv6 and dual-stack pods in the modes this machine's kernel lacks.
	ipv6Modes = guestBinary{"modes", "./internal/datapath/modes", "^TestIPv6Modes$/^(ipvlan|netkit)/"}
)

// A guest binary's and a whole boot's limits. They are wide: `make test`
// runs these guests at the lowest priority beside its cluster packages, where
// they get the CPU the clusters leave idle and take about twice their time
// on an idle machine. Only a guest that hangs comes near them.
const (
	binaryLimit = "20m"
	bootLimit   = 30 * time.Minute
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// goBuild runs go with a static build (the guest has this machine's libc, but
// static binaries need nothing at all).
func goBuild(t *testing.T, args ...string) {
	t.Helper()
	c := exec.Command("go", args...)
	c.Dir = repoRoot()
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Debian 12's newest kernel series (bookworm-security): everything vnetlab uses.
func TestDebian612(t *testing.T) {
	testKernel(t, "6.12", nil, probeTests, modeTests, netkitDataPlane, ipv6Modes)
}

// Debian 12's own kernel (what a default install runs): no netkit (6.7+),
// and vnetlab's tc programs need 6.2+ (bpf_cast_to_kern_ctx), so no eBPF
// modes and no ebpf Service provider: doctor must say so. The modes that
// pass on 6.12 are not run again, except those with kernel-specific code.
func TestDebian61(t *testing.T) {
	e2e := modeTests
	e2e.run = "^(TestIpvlanKnownButGated|TestKernelModes)$"
	testKernel(t, "6.1", []string{"netkit", "netkit-ebpf", "veth-ebpf", "macvlan-ebpf", "ebpf"}, probeTests, e2e)
}

func testKernel(t *testing.T, series string, lacks []string, guestBinaries ...guestBinary) {
	if os.Geteuid() != 0 {
		t.Skip("the stock-kernel tests need root (apt-get download into the cache, the guest's labs): skipped")
	}
	if err := vm.Usable(); err != nil {
		t.Skipf("cannot boot a guest kernel here: %v", err)
	}
	start := time.Now()
	progress := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "kernels %s [%5.1fs] %s\n", series, time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	ctx := context.Background()
	k, err := vm.FetchDebian(ctx, series, vm.DefaultCache(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	progress("kernel %s (%s)", k.Release, k.Root)

	dir := t.TempDir()
	g := vm.Guest{Env: map[string]string{kernel.GuestEnv: "1", kernel.GuestLacksEnv: strings.Join(lacks, ","), "VNETLAB_BIN": "/usr/bin/vnetlab"}, Timeout: binaryLimit,
		Before: []string{"vnetlab doctor"}}
	if g.Vnetlab = os.Getenv("VNETLAB_BIN"); g.Vnetlab == "" {
		g.Vnetlab = filepath.Join(dir, "vnetlab")
		goBuild(t, "build", "-o", g.Vnetlab, "./cmd/vnetlab")
	}
	// Debugging: VNETLAB_KERNEL_BEFORE="cmd1;cmd2" runs commands in the guest
	// first; VNETLAB_KERNEL_RUN narrows every guest binary's -run pattern.
	for _, c := range strings.Split(os.Getenv("VNETLAB_KERNEL_BEFORE"), ";") {
		if c = strings.TrimSpace(c); c != "" {
			g.Before = append(g.Before, c)
		}
	}
	for _, b := range guestBinaries {
		if r := os.Getenv("VNETLAB_KERNEL_RUN"); r != "" {
			b.run = r
		}
		path := filepath.Join(dir, b.name+".test")
		goBuild(t, "test", "-c", "-o", path, b.pkg)
		g.Binaries = append(g.Binaries, vm.GuestBinary{Name: b.name, Path: path, Run: b.run})
	}
	progress("built vnetlab and %d guest test binaries", len(g.Binaries))

	boot := vm.Boot{Kernel: k.Vmlinuz(), MemMB: 2048, CPUs: 2, Timeout: bootLimit,
		Append: "console=ttyS0 quiet panic=-1 random.trust_cpu=on"}
	// run boots the guest with binaries and returns its console.
	run := func(binaries []vm.GuestBinary, attempt int) (*consoleLog, error) {
		gb := g
		gb.Binaries = binaries
		boot.Initrd = filepath.Join(dir, fmt.Sprintf("initrd-%d", attempt))
		f, err := os.Create(boot.Initrd)
		if err != nil {
			t.Fatal(err)
		}
		if err := vm.BuildGuest(k, gb, f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(boot.Initrd)
		progress("initramfs %d MB, %d test binaries; booting under qemu (TCG: software emulation)", fi.Size()>>20, len(binaries))
		console := &consoleLog{progress: progress}
		err = boot.Run(ctx, console)
		console.flush()
		progress("guest powered off")
		if d := os.Getenv("VNETLAB_KERNEL_CONSOLE"); d != "" {
			_ = os.WriteFile(fmt.Sprintf("%s.%d", d, attempt), []byte(console.all.String()), 0o644)
		}
		return console, err
	}
	// Under software emulation with two vCPUs the guest kernel has been seen
	// to trap on an int3 in its own text: a breakpoint of its live code
	// patching (static keys, alternatives) that the other vCPU still
	// executed after the patch was done, the emulator's cross-vCPU code
	// invalidation (seen in CI: in sched_clock_tick at boot; in NF_HOOK
	// as TestIPv6Modes' ipvlan turned netfilter hooks on). Such a
	// crash gets one more boot running the binaries that did not finish, as
	// does any crash before a test ran. Any other crash once tests started
	// is a result.
	var runs []vm.GuestRun
	var console *consoleLog
	var bootErr error
	pending := g.Binaries
	for attempt := 1; attempt <= 2; attempt++ {
		console, bootErr = run(pending, attempt)
		out := console.all.String()
		var done []vm.GuestRun
		done, pending = afterBoot(out, pending, attempt == 1)
		runs = append(runs, done...)
		if len(pending) == 0 {
			break
		}
		progress("the guest kernel crashed (emulator: %s); booting once more for the %d test binaries that did not finish", crashCause(out), len(pending))
	}
	if bootErr != nil || len(runs) != len(guestBinaries) {
		t.Fatalf("guest: %v; %d of %d test binaries ran; console:\n%s", bootErr, len(runs), len(guestBinaries), console.all.String())
	}
	for _, r := range runs {
		t.Run(r.Name, func(t *testing.T) { mirror(t, k.Release, r.Tests, "") })
		if err := r.Problem(); err != nil {
			t.Errorf("%v; its output:\n%s", err, r.Log)
		}
	}
	if t.Failed() {
		t.Logf("guest console:\n%s", console.all.String())
	}
}

// afterBoot reads a boot's console: the runs that count, and the binaries
// of pending to boot again for (none: the runs are final). With retry, an
// emulator's crash (an int3 trap, or any crash before a test ran) leaves
// the binaries that did not finish to boot again; otherwise every run
// counts as it is, a crash included.
func afterBoot(console string, pending []vm.GuestBinary, retry bool) ([]vm.GuestRun, []vm.GuestBinary) {
	got := vm.ParseConsole(console)
	crashed := strings.Contains(console, "Oops:") || strings.Contains(console, "Kernel panic")
	if !retry || !crashed || (len(got) > 0 && !strings.Contains(console, "Oops: int3")) {
		return got, nil
	}
	var done []vm.GuestRun
	var left []vm.GuestBinary
	for _, r := range got {
		if r.Ended {
			done = append(done, r)
		}
	}
	for _, b := range pending {
		if !slices.ContainsFunc(done, func(r vm.GuestRun) bool { return r.Name == b.Name }) {
			left = append(left, b)
		}
	}
	return done, left
}

// crashCause is the console's first Oops line, or its panic line.
func crashCause(console string) string {
	for _, l := range strings.Split(console, "\n") {
		if i := strings.Index(l, "Oops:"); i >= 0 {
			return strings.TrimSpace(l[i:])
		}
	}
	return "Kernel panic before any test ran"
}

// mirror reports the guest tests under parent (a name prefix, "" for the
// top level) as subtests of t, nested as they were in the guest, with the
// guest's result: PASS, FAIL (with its output), SKIP (with the reason).
func mirror(t *testing.T, release string, tests []vm.GuestTest, parent string) {
	for _, gt := range tests {
		rest, ok := strings.CutPrefix(gt.Name, parent)
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue // not a direct child of parent
		}
		t.Run(rest, func(t *testing.T) {
			mirror(t, release, tests, gt.Name+"/")
			switch gt.Status {
			case vm.Pass:
			case vm.Skip:
				t.Skipf("skipped in the guest:\n%s", gt.Output)
			default:
				t.Errorf("%s in the guest (kernel %s):\n%s", gt.Status, release, gt.Output)
			}
		})
	}
}

// consoleLog keeps the guest's console and prints test progress lines as
// they arrive.
type consoleLog struct {
	all      strings.Builder
	partial  string
	progress func(string, ...any)
}

func (c *consoleLog) Write(p []byte) (int, error) {
	c.all.Write(p)
	s := c.partial + string(p)
	lines := strings.Split(s, "\n")
	c.partial = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		c.show(l)
	}
	return len(p), nil
}

func (c *consoleLog) flush() { c.show(c.partial); c.partial = "" }

func (c *consoleLog) show(l string) {
	l = strings.TrimRight(l, "\r")
	if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "=== RUN") || strings.Contains(l, vm.MarkBegin) ||
		strings.Contains(l, vm.MarkEnd) || strings.HasPrefix(l, "    --- ") || strings.HasPrefix(l, "vnetlab guest") || strings.Contains(l, "Kernel panic") {
		c.progress("guest: %s", l)
	}
}

var _ io.Writer = (*consoleLog)(nil)
