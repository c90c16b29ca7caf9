package kernels

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/vm"
)

// Which crashes of the emulated guest get another boot, and for which
// binaries: an int3 trap (the emulator's cross-vCPU code patching) or any
// crash before a test ran, once, for the binaries that did not finish;
// any other crash, or a second one, is the result.
func TestAfterBoot(t *testing.T) {
	bins := []vm.GuestBinary{{Name: "kernel"}, {Name: "e2e"}, {Name: "modes"}}
	ran := func(name string) string {
		return vm.MarkBegin + " " + name + "\n=== RUN   TestX\n--- PASS: TestX (0.01s)\n" + vm.MarkEnd + " " + name + " exit=0\n"
	}
	crashIn := func(name, oops string) string {
		return vm.MarkBegin + " " + name + "\n=== RUN   TestY\n[  320.05] " + oops + "\n[  320.06] Kernel panic - not syncing: Fatal exception in interrupt\n"
	}
	int3 := "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI"
	other := "Oops: general protection fault, probably for non-canonical address"
	names := func(rs []vm.GuestRun) string {
		var n []string
		for _, r := range rs {
			n = append(n, r.Name)
		}
		return strings.Join(n, ",")
	}
	for _, c := range []struct {
		name, console string
		retry         bool
		runs, left    string
	}{
		{"no crash", ran("kernel") + ran("e2e") + ran("modes"), true, "kernel,e2e,modes", ""},
		{"int3 mid-run: again for the unfinished", ran("kernel") + ran("e2e") + crashIn("modes", int3), true, "kernel,e2e", "modes"},
		{"int3 mid-run, second boot: a result", ran("kernel") + ran("e2e") + crashIn("modes", int3), false, "kernel,e2e,modes", ""},
		{"another oops mid-run: a result", ran("kernel") + crashIn("e2e", other), true, "kernel,e2e", ""},
		{"any crash before a test ran: again for all", "[    3.1] " + other + "\n[    3.2] Kernel panic - not syncing\n", true, "", "kernel,e2e,modes"},
	} {
		runs, left := afterBoot(c.console, bins, c.retry)
		var l []string
		for _, b := range left {
			l = append(l, b.Name)
		}
		if names(runs) != c.runs || strings.Join(l, ",") != c.left {
			t.Errorf("%s: runs %q, again for %q; want %q, %q", c.name, names(runs), strings.Join(l, ","), c.runs, c.left)
		}
		if c.name == "int3 mid-run, second boot: a result" && !slices.ContainsFunc(runs, func(r vm.GuestRun) bool { return r.Name == "modes" && r.Problem() != nil }) {
			t.Errorf("%s: the crashed run must report its problem", c.name)
		}
	}
	if got := crashCause(crashIn("modes", int3)); got != int3 {
		t.Errorf("crash cause %q, want %q", got, int3)
	}
}
