package lab

import (
	"os"
	"path/filepath"
	"testing"
)

// A local cluster's teardown leaves kubelet's sysctls alone while another
// cluster, whose kubelet needs them, is still up: only the last restores.
func TestSysctlHolderIsAnotherLabWithSysctls(t *testing.T) {
	root := StateRoot
	StateRoot = t.TempDir()
	t.Cleanup(func() { StateRoot = root })
	write := func(name, journal string) {
		t.Helper()
		if err := os.MkdirAll(labDir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(labDir(name), "journal"), []byte(journal), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("k1", "netns vnl-k1-cp\nsysctl vm.overcommit_memory 0\n")
	write("k2", "netns vnl-k2-cp\nsysctl vm.overcommit_memory 0\n")
	write("lab1", "netns vnl-lab1-node\n")
	if got := sysctlHolder("k2"); got != "k1" {
		t.Errorf("sysctlHolder(k2) = %q with k1 up, want k1", got)
	}
	if err := os.RemoveAll(labDir("k1")); err != nil {
		t.Fatal(err)
	}
	if got := sysctlHolder("k2"); got != "" {
		t.Errorf("sysctlHolder(k2) = %q with no other cluster (lab1 has no sysctls), want none", got)
	}
}
