package vm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/cavaliergopher/cpio"
)

func TestNewestPackage(t *testing.T) {
	out := `linux-image-6.12.107+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
linux-image-6.12.117+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
linux-image-6.12.99+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs
`
	got, err := NewestPackage(out)
	if err != nil || got != "linux-image-6.12.117+deb12-amd64-unsigned" {
		t.Errorf("NewestPackage = %q, %v", got, err)
	}
	if ReleaseOf(got) != "6.12.117+deb12-amd64" {
		t.Errorf("ReleaseOf(%s) = %q", got, ReleaseOf(got))
	}
	if _, err := NewestPackage(""); err == nil {
		t.Error("no package: no error")
	}
	if p := DebianPackagePattern("6.12"); p != `^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$` {
		t.Errorf("pattern %s", p)
	}
	old := "linux-image-6.1.0-9-amd64-unsigned - Linux 6.1\nlinux-image-6.1.0-56-amd64-unsigned - Linux 6.1\n"
	if got, _ := NewestPackage(old); got != "linux-image-6.1.0-56-amd64-unsigned" || ReleaseOf(got) != "6.1.0-56-amd64" {
		t.Errorf("6.1: %q %q", got, ReleaseOf(got))
	}
	if p := DebianPackagePattern("6.1"); p != `^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$` {
		t.Errorf("pattern %s", p)
	}
}

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\tlibgone.so.1 => not found\n"
	want := []string{"/lib/x86_64-linux-gnu/libmnl.so.0", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if got := ParseLdd(out); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseLdd = %v, want %v", got, want)
	}
	if got := ParseLdd("\tnot a dynamic executable\n"); len(got) != 0 {
		t.Errorf("static: %v", got)
	}
}

func TestModuleClosure(t *testing.T) {
	dep := `kernel/net/openvswitch/openvswitch.ko: kernel/net/netfilter/nf_conntrack.ko kernel/lib/libcrc32c.ko kernel/net/nsh/nsh.ko
kernel/net/netfilter/nf_conntrack.ko: kernel/lib/libcrc32c.ko
kernel/lib/libcrc32c.ko:
kernel/crypto/crc32c_generic.ko:
kernel/net/nsh/nsh.ko:
kernel/drivers/net/ipvlan/ipvlan.ko:
kernel/drivers/net/ipvlan/ipvtap.ko: kernel/drivers/net/ipvlan/ipvlan.ko kernel/drivers/net/tap.ko
kernel/drivers/net/tap.ko:
kernel/drivers/net/wireless/big.ko:
`
	soft := "# comment\nsoftdep libcrc32c pre: crc32c_generic\n"
	m := ParseModuleDeps(dep, soft)
	got := m.Closure([]string{"openvswitch", "kernel/drivers/net/ipvlan/", "not-in-this-kernel"})
	want := []string{
		"kernel/crypto/crc32c_generic.ko", "kernel/drivers/net/ipvlan/ipvlan.ko", "kernel/drivers/net/ipvlan/ipvtap.ko",
		"kernel/drivers/net/tap.ko", "kernel/lib/libcrc32c.ko", "kernel/net/netfilter/nf_conntrack.ko",
		"kernel/net/nsh/nsh.ko", "kernel/net/openvswitch/openvswitch.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Closure =\n%v\nwant\n%v", got, want)
	}
	if ModuleName("kernel/net/x/nf-conntrack.ko.xz") != "nf_conntrack" {
		t.Error("ModuleName does not read dashes as underscores")
	}
}

// The image is a cpio newc archive the kernel can unpack: parents first,
// links and data intact.
func TestInitramfsWrite(t *testing.T) {
	r := NewInitramfs()
	r.Data("/etc/deep/dir/file", []byte("hello"), 0o644)
	r.Symlink("/usr/bin/sh", "bash")
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	cr := cpio.NewReader(&buf)
	seen := map[string]bool{}
	for {
		h, err := cr.Next()
		if err != nil {
			break
		}
		if i := strings.LastIndex(h.Name, "/"); i > 0 && !seen[h.Name[:i]] {
			t.Errorf("%s comes before its directory", h.Name)
		}
		seen[h.Name] = true
		switch h.Name {
		case "etc/deep/dir/file":
			b := make([]byte, h.Size)
			if _, err := cr.Read(b); err != nil || string(b) != "hello" || h.Mode.Perm() != 0o644 {
				t.Errorf("file: %q %v mode %v", b, err, h.Mode)
			}
		case "usr/bin/sh", "bin":
			if h.Mode&^cpio.ModePerm != cpio.TypeSymlink {
				t.Errorf("%s is not a symlink: %v", h.Name, h.Mode)
			}
		}
	}
	for _, p := range []string{"bin", "usr/bin/sh", "etc/deep/dir", "etc/deep/dir/file"} {
		if !seen[p] {
			t.Errorf("image has no %s", p)
		}
	}
}

func TestParseConsole(t *testing.T) {
	console := "SeaBIOS\r\nvnetlab guest: kernel 6.12\r\n" +
		MarkBegin + " kernel\r\n=== RUN   TestA\r\n--- PASS: TestA (0.01s)\r\nPASS\r\n" + MarkEnd + " kernel exit=0\r\n" +
		MarkBegin + " e2e\n" +
		"=== RUN   TestModes\n=== RUN   TestModes/ipvlan\n    x_test.go:1: ping failed\n[   12.3] some kernel line\n" +
		"=== RUN   TestModes/ovs\n--- FAIL: TestModes (3.00s)\n    --- FAIL: TestModes/ipvlan (1.00s)\n    --- PASS: TestModes/ovs (2.00s)\n" +
		"=== RUN   TestSkipped\n--- SKIP: TestSkipped (0.00s)\n" +
		"=== RUN   TestHangs\npanic: test timed out after 8m0s\n" + MarkEnd + " e2e exit=2\n" +
		MarkBegin + " died\n=== RUN   TestX\n[ 99.0] Kernel panic - not syncing\n"
	runs := ParseConsole(console)
	if len(runs) != 3 {
		t.Fatalf("%d runs: %+v", len(runs), runs)
	}
	k := runs[0]
	if k.Name != "kernel" || !k.Ended || k.Exit != 0 || len(k.Tests) != 1 || k.Tests[0].Status != Pass || k.Problem() != nil {
		t.Errorf("kernel run: %+v", k)
	}
	e := runs[1]
	statuses := map[string]Status{}
	for _, gt := range e.Tests {
		statuses[gt.Name] = gt.Status
	}
	want := map[string]Status{"TestModes": Fail, "TestModes/ipvlan": Fail, "TestModes/ovs": Pass, "TestSkipped": Skip, "TestHangs": Incomplete}
	if !reflect.DeepEqual(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	if e.Exit != 2 || e.Problem() != nil {
		t.Errorf("e2e exit %d problem %v", e.Exit, e.Problem())
	}
	for _, gt := range e.Tests {
		if gt.Name == "TestModes/ipvlan" && !strings.Contains(gt.Output, "ping failed") {
			t.Errorf("subtest output lost: %q", gt.Output)
		}
		if gt.Name == "TestModes" && !strings.Contains(gt.Output, "ping failed") {
			t.Errorf("test output lost: %q", gt.Output)
		}
	}
	d := runs[2]
	if d.Ended || d.Problem() == nil || len(d.Tests) != 1 || d.Tests[0].Status != Incomplete {
		t.Errorf("died run: %+v", d)
	}
}
