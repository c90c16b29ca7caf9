package tcx

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// A program attached to a namespace's loopback is on it (the kernel lists
// it at that hook) and Linked while pinned; Detach takes it off at once,
// and a second Detach of the same pin, or of no pin, is nothing to do.
func TestAttachDetach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace and loads a program")
	}
	ns := fmt.Sprintf("vnl-tcx-test-%d", os.Getpid())
	if err := nsutil.Create(ns, "vnetlab tcx test"); err != nil {
		t.Fatal(err)
	}
	defer nsutil.Delete(ns)
	dir := filepath.Join("/sys/fs/bpf/vnetlab", fmt.Sprintf("tcx-test-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "tcx_test", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	var lo int
	count := func() int {
		t.Helper()
		n := 0
		if err := nsutil.Do(ns, func() error {
			l, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			lo = l.Attrs().Index
			res, err := link.QueryPrograms(link.QueryOptions{Target: lo, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			n = len(res.Programs)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d programs on a new namespace's loopback", n)
	}
	pin := filepath.Join(dir, "ingress")
	if err := Attach(ns, lo, prog, ebpf.AttachTCXIngress, pin); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 || !Linked(pin) {
		t.Fatalf("after Attach: %d programs on lo, linked %v; want 1, true", n, Linked(pin))
	}
	if err := Detach(pin); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after Detach: %d programs on lo, want 0", n)
	}
	if Linked(filepath.Join(dir, "none")) {
		t.Error("a missing pin reads as linked")
	}
	if err := Detach(filepath.Join(dir, "none")); err != nil {
		t.Errorf("detach of no pin: %v", err)
	}
}

// Dir lists a directory's names, and none for a directory that is not
// there (a plane that never attached anything).
func TestDir(t *testing.T) {
	dir := t.TempDir()
	if names, err := Dir(filepath.Join(dir, "none")); names != nil || err != nil {
		t.Errorf("Dir of a missing directory = %v, %v; want none", names, err)
	}
	for _, n := range []string{"b", "a"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := Dir(dir); err != nil || fmt.Sprint(names) != "[a b]" {
		t.Errorf("Dir = %v, %v; want [a b]", names, err)
	}
	if _, err := Dir(filepath.Join(dir, "a", "\x00")); err == nil {
		t.Error("Dir of a bad path: no error")
	}
}
