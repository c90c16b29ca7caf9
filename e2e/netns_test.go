package e2e

// Labs beside iproute2's `ip netns`, which makes /run/netns a shared bind
// mount of itself whenever it is not a mount point.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/rootns"
)

// probe adds an iproute2 namespace (not a vnetlab name) removed when the
// test ends.
func probe(t *testing.T, name string) {
	t.Helper()
	testnet.IPNetns(t, "add", name)
	t.Cleanup(func() {
		if _, err := os.Lstat(nsutil.Path(name)); err == nil {
			testnet.IPNetns(t, "del", name)
		}
	})
}

// assertNoTrace fails if anything of lab is left: entries of /run/netns,
// `ip netns list` lines, mounts (also beneath a later mount of /run/netns),
// its state.
func assertNoTrace(t *testing.T, lab string) {
	t.Helper()
	assertGone(t, lab)
	prefix := "vnl-" + lab + "-"
	if out := testnet.IPNetns(t, "list"); strings.Contains(out, prefix) {
		t.Errorf("ip netns list still shows lab %s:\n%s", lab, out)
	}
	ms, err := nsutil.MountedEntries(prefix)
	if err != nil || len(ms) > 0 {
		t.Errorf("lab %s left mounts: %v %v", lab, ms, err)
	}
}

// In the machine's own /run/netns, whatever its starting state: a lab
// removed after `ip netns add`/`del` ran while it was up, and a lab built
// after `ip netns add`; nothing of the lab stays and the root namespace is
// as it was.
func TestNetnsBesideIproute2(t *testing.T) {
	probeName := fmt.Sprintf("e2eprobe%d", os.Getpid())
	t.Run("vnetlab first", func(t *testing.T) {
		before := rootns.Snapshot()
		up(t, "e2nsa", "--mode", "veth-routed")
		probe(t, probeName)
		testnet.IPNetns(t, "del", probeName)
		must(t, "down", "e2nsa")
		assertNoTrace(t, "e2nsa")
		if d := rootns.Diff(before, rootns.Snapshot()); d != "" {
			t.Errorf("the root namespace changed:\n%s", d)
		}
	})
	t.Run("iproute2 first", func(t *testing.T) {
		before := rootns.Snapshot()
		probe(t, probeName)
		up(t, "e2nsb", "--mode", "veth-routed")
		must(t, "down", "e2nsb")
		assertNoTrace(t, "e2nsb")
		testnet.IPNetns(t, "exec", probeName, "true") // iproute2's namespace untouched
		testnet.IPNetns(t, "del", probeName)
		if d := rootns.Diff(before, rootns.Snapshot()); d != "" {
			t.Errorf("the root namespace changed:\n%s", d)
		}
	})
}

// layoutCaseEnv names the case TestNetnsLayoutInChild plays; parentMntEnv
// is the mount namespace it must not be in.
const (
	layoutCaseEnv = "VNETLAB_E2E_NETNS_CASE"
	parentMntEnv  = "VNETLAB_E2E_NETNS_PARENT"
)

// The starting states of /run/netns the machine's own cannot be put in
// without touching other tools' mounts, each played by this test binary in
// a mount namespace of its own over a fresh /run (tmpfs): whatever happens
// there vanishes with it.
//   - plain: /run/netns a plain directory (a fresh machine), vnetlab first;
//   - plain-shared: the same under a shared /run (systemd's propagation);
//   - older: an older vnetlab's lab, its namespaces mounted on the plain
//     directory, then `ip netns add`/`del` (the sequence), then down;
//   - older-stale: the same, then what that older down left (copies
//     unmounted, state gone: entries that cannot be entered), then clean.
func TestNetnsLayouts(t *testing.T) {
	for _, c := range []string{"plain", "plain-shared", "older", "older-stale"} {
		t.Run(c, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNetnsLayoutInChild$", "-test.v", "-test.count=1")
			parent, err := os.Readlink("/proc/self/ns/mnt")
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(os.Environ(), layoutCaseEnv+"="+c, parentMntEnv+"="+parent, "VNETLAB_BIN="+bin)
			// A new mount namespace; Go makes its mounts private, so
			// nothing done in it propagates back.
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			// The network side of the root namespace is the machine's in
			// the child too: compared here, around each case.
			before := rootns.Snapshot()
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNetnsLayoutInChild") {
				t.Fatalf("case %s: %v\n%s", c, err, out)
			}
			if d := rootns.Diff(before, rootns.Snapshot()); d != "" {
				t.Errorf("case %s changed the root namespace:\n%s", c, d)
			}
			t.Logf("case %s:\n%s", c, lines(string(out), "netns_test.go"))
		})
	}
}

// lines keeps the lines of s that contain sub.
func lines(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestNetnsLayoutInChild(t *testing.T) {
	c := os.Getenv(layoutCaseEnv)
	if c == "" {
		t.Skip("played by TestNetnsLayouts, in a mount namespace of its own")
	}
	// Never over the machine's own /run.
	self, err := os.Readlink("/proc/self/ns/mnt")
	if parent := os.Getenv(parentMntEnv); err != nil || parent == "" || self == parent {
		t.Fatalf("not in a mount namespace of its own (%s, the test's %q, %v): refusing to mount over /run", self, parent, err)
	}
	// A fresh /run (namespaces, lab state); the machine-wide places `clean`
	// sweeps hidden too, so that it finds no other lab's pins or cgroups
	// there (their labs' state is not in this /run).
	shadow := []string{"/run", tcbpf.Root}
	if root, err := cgroup.Root(); err == nil {
		shadow = append(shadow, filepath.Join(root, cgroup.Sub))
	}
	for _, dir := range shadow {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=755"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(nsutil.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c == "plain-shared" {
		if err := unix.Mount("", "/run", "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			t.Fatal(err)
		}
	}
	const lab = "e2nsl"
	switch c {
	case "plain", "plain-shared":
		up(t, lab, "--mode", "veth-routed")
		top := mountsOn(t, "/run", mountsAt(t, nsutil.Dir))
		if len(top) != 1 || !strings.Contains(top[0].Optional, "shared:") {
			t.Fatalf("after up, %s: %s; want one shared bind mount, as ip netns add makes", nsutil.Dir, describe(top))
		}
		probe(t, "probe1")
		if again := mountsOn(t, "/run", mountsAt(t, nsutil.Dir)); len(again) != 1 {
			t.Errorf("ip netns add stacked another mount on %s: %s", nsutil.Dir, describe(again))
		}
		testnet.IPNetns(t, "del", "probe1")
		must(t, "down", lab)
		assertNoTrace(t, lab)
	case "older", "older-stale":
		nss := olderLab(t, lab)
		probe(t, "probe1")
		testnet.IPNetns(t, "del", "probe1")
		// The layout: each namespace mounted twice, the original
		// on /run beneath the bind of /run/netns and its copy on that bind.
		for _, n := range nss {
			if ms := mountsAt(t, nsutil.Path(n)); len(ms) != 2 {
				t.Fatalf("%s: %s; want the original beneath and its copy", n, describe(ms))
			}
		}
		if c == "older" {
			must(t, "down", lab)
			assertNoTrace(t, lab)
			break
		}
		// What the older down left: it unmounted the copies, failed on
		// the entries (EBUSY) and removed the lab's state.
		for _, n := range nss {
			if err := unix.Unmount(nsutil.Path(n), unix.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(nsutil.Path(n)); err == nil || !strings.Contains(err.Error(), "busy") {
				t.Fatalf("remove %s after unmounting its copy: %v; want EBUSY (the issue)", n, err)
			}
		}
		if err := os.RemoveAll(filepath.Join("/run/vnetlab/labs", lab)); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ip", "netns", "exec", nss[0], "true").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Invalid argument") {
			t.Fatalf("ip netns exec %s: %v %s; want Invalid argument (a stale entry)", nss[0], err, out)
		}
		r := must(t, "clean")
		if want := fmt.Sprintf("%d stale namespace entries", len(nss)); !strings.Contains(r.stdout, want) {
			t.Errorf("clean says %q; want %q", r.stdout, want)
		}
		t.Logf("vnetlab clean: %s", strings.TrimSpace(r.stdout))
		assertNoTrace(t, lab)
	default:
		t.Fatalf("unknown case %q", c)
	}
	t.Logf("%s: nothing of lab %s left; %s", c, lab, describe(mountsAt(t, nsutil.Dir)))
}

// olderLab builds a lab whose namespaces are mounted on /run/netns as a
// plain directory, as older versions of vnetlab made them: up on a private
// bind of /run/netns (which vnetlab leaves as it is), then each namespace
// moved off, the bind removed, and each moved back onto the plain directory.
func olderLab(t *testing.T, lab string) []string {
	t.Helper()
	if err := unix.Mount(nsutil.Dir, nsutil.Dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", nsutil.Dir, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	up(t, lab, "--mode", "veth-routed")
	nss := labNamespaces(lab)
	if len(nss) == 0 {
		t.Fatal("the lab has no namespaces")
	}
	move := func(from, to string) {
		t.Helper()
		if err := unix.Mount(from, to, "", unix.MS_MOVE, ""); err != nil {
			t.Fatalf("move %s to %s: %v", from, to, err)
		}
	}
	for _, n := range nss {
		stage := filepath.Join("/run", "stage-"+n)
		if err := os.WriteFile(stage, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		move(nsutil.Path(n), stage)
	}
	if err := unix.Unmount(nsutil.Dir, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range nss {
		stage := filepath.Join("/run", "stage-"+n)
		move(stage, nsutil.Path(n))
		if err := os.Remove(stage); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := mountinfo.Mounted(nsutil.Dir); err != nil || m {
		t.Fatalf("%s should be a plain directory now (mounted %v, %v)", nsutil.Dir, m, err)
	}
	return nss
}

func mountsAt(t *testing.T, path string) []*mountinfo.Info {
	t.Helper()
	ms, err := nsutil.MountsAt(path)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// mountsOn keeps the mounts whose parent is the mount at dir (the child's
// own /run: the machine's /run/netns may be mounted beneath it, as a copy).
func mountsOn(t *testing.T, dir string, ms []*mountinfo.Info) []*mountinfo.Info {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, 0, unix.STATX_MNT_ID, &stx); err != nil {
		t.Fatal(err)
	}
	var out []*mountinfo.Info
	for _, m := range ms {
		if uint64(m.Parent) == stx.Mnt_id {
			out = append(out, m)
		}
	}
	return out
}

func describe(ms []*mountinfo.Info) string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("mount %d on %d (%s) %s", m.ID, m.Parent, m.Root, m.Optional))
	}
	return fmt.Sprintf("%d mounts [%s]; under /run: %s", len(ms), strings.Join(out, "; "), runMounts())
}

// runMounts lists the mountinfo lines under /run (for failure messages).
func runMounts() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return "\n" + lines(string(b), " /run")
}
