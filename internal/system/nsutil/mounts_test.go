package nsutil

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// ownMountNSEnv tells a re-run of this test binary that it is the copy
// played in a mount namespace of its own; its value is the parent's mount
// namespace, which the copy checks it is not in before it mounts anything.
const ownMountNSEnv = "VNETLAB_NSUTIL_OWN_MNTNS"

// inOwnMountNS runs the calling test again in a copy of this binary in a
// mount namespace of its own over a fresh /run (tmpfs), and reports true
// there; in the parent it waits for the copy, fails if it did, and reports
// false. The machine's /run/netns is never touched: whatever is mounted in
// the copy goes with its mount namespace.
func inOwnMountNS(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if parent := os.Getenv(ownMountNSEnv); parent != "" {
		if self == parent {
			t.Fatalf("still in the parent's mount namespace %s: refusing to mount over /run", self)
		}
		if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=755"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ownMountNSEnv+"="+self)
	// Go makes the new namespace's mounts private: nothing propagates back.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a mount namespace of its own: %v\n%s", t.Name(), err, out)
	}
	t.Logf("in a mount namespace of its own:\n%s", out)
	return false
}

// mountsOnRun keeps the mounts at p whose parent is the test's /run (the
// machine's /run/netns, when it is a mount point, lies beneath it).
func mountsOnRun(t *testing.T, p string) []*mountinfo.Info {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, "/run", 0, unix.STATX_MNT_ID, &stx); err != nil {
		t.Fatal(err)
	}
	ms, err := MountsAt(p)
	if err != nil {
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

func ipNetns(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip netns %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Create on a plain /run/netns makes it what `ip netns add` makes: one
// shared mount point, which a later `ip netns add` uses as it is instead
// of binding the directory onto itself again; Delete leaves no mount.
func TestCreateMountsDirAsIproute2(t *testing.T) {
	if !inOwnMountNS(t) {
		return
	}
	const name = "vnl-nsutest-a"
	if err := Create(name, ""); err != nil {
		t.Fatal(err)
	}
	top := mountsOnRun(t, Dir)
	if len(top) != 1 || !strings.Contains(top[0].Optional, "shared:") {
		t.Fatalf("%s after Create: %d mounts %v; want one shared mount point", Dir, len(top), top)
	}
	ipNetns(t, "add", "probe1")
	ipNetns(t, "del", "probe1")
	if again := mountsOnRun(t, Dir); len(again) != 1 || again[0].ID != top[0].ID {
		t.Errorf("ip netns add after Create changed %s's mounts: %v", Dir, again)
	}
	if !IsNamespace(name) {
		t.Errorf("%s is no namespace after ip netns add/del", name)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if ms, err := MountedEntries(name); err != nil || len(ms) > 0 {
		t.Errorf("Delete left %v %v", ms, err)
	}
	if _, err := os.Lstat(Path(name)); !os.IsNotExist(err) {
		t.Errorf("Delete left the entry: %v", err)
	}
}

// An entry mounted on the plain directory, then `ip netns add` (which binds
// the directory onto itself, copying the mount on top and covering the
// original): Delete removes both mounts and the entry. An entry whose
// covered mount is not a namespace stays, and Delete's error names the
// mounts that hold it.
func TestDeleteCoveredEntry(t *testing.T) {
	if !inOwnMountNS(t) {
		return
	}
	// The layout an older vnetlab made: an entry mounted on the plain
	// directory (this test's own network namespace stands for one).
	const ns, other = "vnl-nsutest-old", "vnl-nsutest-file"
	for _, n := range []string{ns, other} {
		if err := os.WriteFile(Path(n), nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("/proc/self/ns/net", Path(ns), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join("/run", "plain-file")
	if err := os.WriteFile(plain, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(plain, Path(other), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	ipNetns(t, "add", "probe1")
	ipNetns(t, "del", "probe1")
	for _, n := range []string{ns, other} {
		if ms, err := MountsAt(Path(n)); err != nil || len(ms) != 2 {
			t.Fatalf("%s after ip netns add: %d mounts %v; want the original beneath and its copy", n, len(ms), err)
		}
	}
	if err := Delete(ns); err != nil {
		t.Fatalf("Delete of a covered namespace entry: %v", err)
	}
	if ms, _ := MountsAt(Path(ns)); len(ms) > 0 {
		t.Errorf("Delete left %d mounts at %s", len(ms), Path(ns))
	}
	if _, err := os.Lstat(Path(ns)); !os.IsNotExist(err) {
		t.Errorf("Delete left the entry %s: %v", ns, err)
	}
	err := Delete(other)
	if err == nil {
		t.Fatalf("Delete removed %s, whose covered mount is a plain file, not a namespace", other)
	}
	for _, want := range []string{"not a namespace", "under another mount", "at /run,"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Delete's error %q does not say %q", err, want)
		}
	}
	t.Logf("Delete of %s: %v", other, err)
	if ms, _ := MountsAt(Path(other)); len(ms) != 1 {
		t.Errorf("the covered plain-file mount should stay: %d mounts", len(ms))
	}
}
