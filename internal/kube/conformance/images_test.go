package conformance

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vnetlab/vnetlab/internal/kube/image"
)

func TestTestImages(t *testing.T) {
	list := `registry.k8s.io/e2e-test-images/agnhost:2.55
registry.k8s.io/e2e-test-images/agnhost:2.66.1
registry.k8s.io/e2e-test-images/busybox:1.37.0-2
registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
registry.k8s.io/e2e-test-images/nginx:1.27.0-2
registry.k8s.io/e2e-test-images/regression-issue-74839:1.5
registry.k8s.io/pause:3.10.2
registry.k8s.io/etcd:3.7.0-0
registry.k8s.io/build-image/distroless-iptables:v0.9.9
`
	got, err := testImages(list)
	if err != nil {
		t.Fatal(err)
	}
	want := []testImage{
		{distrolessIptablesRepo, []string{"registry.k8s.io/build-image/distroless-iptables:v0.9.9"}},
		{agnhostRepo, []string{"registry.k8s.io/e2e-test-images/agnhost:2.55", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"}},
		{busyboxRepo, []string{"registry.k8s.io/e2e-test-images/busybox:1.37.0-2"}},
		{glibcDNSRepo, []string{"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"}},
		{regressionRepo, []string{"registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"}},
		{pauseRepo, []string{"registry.k8s.io/pause:3.10.2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("testImages = %+v, want %+v", got, want)
	}
	if _, err := testImages("registry.k8s.io/pause:3.10.2\n"); err == nil || !strings.Contains(err.Error(), "no e2e-test-images/agnhost image") {
		t.Errorf("a list without agnhost: %v", err)
	}
}

// The CLOSE_WAIT spec's image runs what the spec runs in it: its layer
// unpacked and chrooted into, the shell runs sleep, test, cat, grep, which
// and conntrack (whose shared libraries the image must hold).
func TestDistrolessIptablesImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot into the image's files needs root")
	}
	ref := "registry.k8s.io/build-image/distroless-iptables:v0.9.9"
	imgs, err := testImages("registry.k8s.io/e2e-test-images/agnhost:2.66.1\nregistry.k8s.io/e2e-test-images/busybox:1.37.0-2\nregistry.k8s.io/pause:3.10.2\n" + ref + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(imgs, func(ti testImage) bool { return ti.repo == distrolessIptablesRepo }) {
		t.Fatalf("testImages(%s) = %+v: not picked", ref, imgs)
	}
	im, err := builders[distrolessIptablesRepo](imageInputs{}, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	root := unpack(t, im)
	// The spec's commands (kube_proxy.go), on a table of our own: the
	// chroot has no /proc.
	script := `sleep 0 && test -f /etc/table && cat /etc/table | grep -m 1 -E 'CLOSE_WAIT.*dport=11302' && which conntrack && conntrack --version`
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	table := "ipv4 2 tcp 6 3599 CLOSE_WAIT src=10.0.0.2 dst=10.0.0.3 sport=40000 dport=11302\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "table"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-x", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in the image: %v\n%s", err, out)
	}
	for _, want := range []string{"3599 CLOSE_WAIT", "/usr/bin/conntrack", "conntrack v"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// unpack writes the image's one layer into a temporary directory.
func unpack(t *testing.T, im *image.Image) string {
	t.Helper()
	layers, err := im.Image.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	root := t.TempDir()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode))
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
