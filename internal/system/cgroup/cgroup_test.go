package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRootFromProcMounts(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Fatalf("%s is not a cgroup v2 root: %v", root, err)
	}
	p, err := LabPath("fa1")
	if err != nil || p != filepath.Join(root, Sub, "fa1") {
		t.Fatalf("LabPath = %s, %v", p, err)
	}
}

func TestBadNamesAndForeignPaths(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "../x"} {
		if _, err := LabPath(bad); err == nil {
			t.Errorf("LabPath(%q) accepted", bad)
		}
	}
	root, err := Root()
	if err != nil {
		t.Skip(err)
	}
	// Never the root cgroup, nor anything outside vnetlab's subtree.
	for _, p := range []string{root, filepath.Join(root, Sub), filepath.Join(root, "system.slice"), "/tmp/x", filepath.Join(root, Sub, "a", "b")} {
		if err := Remove(p); err == nil || !strings.Contains(err.Error(), "not a vnetlab lab cgroup") {
			t.Errorf("Remove(%s) = %v", p, err)
		}
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/mnt/with\040space`); got != "/mnt/with space" {
		t.Fatalf("unescape = %q", got)
	}
	if got := unescape(`/odd\04`); got != `/odd\04` {
		t.Fatalf("unescape = %q", got)
	}
}

// NetNamespaces of this process's own cgroup holds this process's network
// namespace, once, and no namespace twice.
func TestNetNamespaces(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var rel string
	for _, l := range strings.Split(string(b), "\n") {
		if r, ok := strings.CutPrefix(l, "0::"); ok {
			rel = r
		}
	}
	nss, err := NetNamespaces(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, ns := range nss {
		var st unix.Stat_t
		if err := unix.Stat(ns, &st); err != nil {
			continue // its process ended since
		}
		seen[st.Ino]++
	}
	if seen[self.Ino] != 1 {
		t.Errorf("this process's namespace listed %d times in %d namespaces of cgroup %s, want once", seen[self.Ino], len(nss), rel)
	}
	for ino, n := range seen {
		if n > 1 {
			t.Errorf("namespace %d listed %d times", ino, n)
		}
	}
}
