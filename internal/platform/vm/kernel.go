// Package vm boots a stock distribution kernel under qemu with vnetlab and its
// tests inside an initramfs, so that vnetlab is proven on kernels other than
// the one this machine runs (modes the host kernel lacks: ipvlan, the Open
// vSwitch kernel datapath, netkit). Fetching and caching the kernel, building
// the initramfs, running qemu and reading the guest's console are apart; the
// parsing is pure.
package vm

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Kernel is an unpacked distribution kernel: its image and its module tree
// (indexed by depmod, modules decompressed).
type Kernel struct {
	Package string // Debian package name
	Release string // uname -r, e.g. 6.12.117+deb12-amd64
	Root    string // unpacked package: boot/ and lib/modules/RELEASE/
}

// Vmlinuz is the kernel image qemu boots.
func (k *Kernel) Vmlinuz() string { return filepath.Join(k.Root, "boot", "vmlinuz-"+k.Release) }

// ModuleDir is lib/modules/RELEASE inside the unpacked package.
func (k *Kernel) ModuleDir() string { return filepath.Join(k.Root, "lib", "modules", k.Release) }

// DebianPackagePattern is the apt-cache search pattern of Debian 12's stock
// kernel packages of one series: "6.1" (bookworm's own kernel,
// linux-image-6.1.0-N-amd64) or a newer one such as "6.12" (from
// bookworm-security/backports, linux-image-6.12.N+deb12-amd64). Unsigned: the
// image is the same.
func DebianPackagePattern(series string) string {
	if series == "6.1" {
		return `^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$`
	}
	return `^linux-image-` + strings.ReplaceAll(series, ".", `\.`) + `\.[0-9]+\+deb12-amd64-unsigned$`
}

// NewestPackage picks the newest package name from `apt-cache search
// --names-only` output (lines "NAME - DESCRIPTION"), comparing the numeric
// parts of the version in the name.
func NewestPackage(searchOutput string) (string, error) {
	var names []string
	for _, line := range strings.Split(searchOutput, "\n") {
		if name, _, ok := strings.Cut(line, " - "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no kernel package found")
	}
	sort.Slice(names, func(i, j int) bool { return versionLess(numbers(names[i]), numbers(names[j])) })
	return names[len(names)-1], nil
}

// numbers returns the integers in s in order ("linux-image-6.12.117+deb12" -> 6 12 117 12).
func numbers(s string) []int {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// ReleaseOf is the kernel release (uname -r) a linux-image package holds.
func ReleaseOf(pkg string) string {
	s := strings.TrimPrefix(pkg, "linux-image-")
	return strings.TrimSuffix(s, "-unsigned")
}

// DefaultCache is where fetched kernels are kept, one directory per package.
func DefaultCache() string {
	if d := os.Getenv("VNETLAB_KERNEL_CACHE"); d != "" {
		return d
	}
	home, err := os.UserCacheDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, "vnetlab", "kernels")
}

// FetchDebian returns Debian's newest stock kernel of a series (e.g. "6.12"),
// from cache when it is there, else downloaded with apt-get download,
// unpacked with dpkg-deb, its modules decompressed and indexed with depmod.
// Nothing is installed on this machine. Progress goes to log.
func FetchDebian(ctx context.Context, series, cache string, log io.Writer) (*Kernel, error) {
	pattern := DebianPackagePattern(series)
	out, err := exec.CommandContext(ctx, "apt-cache", "search", "--names-only", pattern).Output()
	if err == nil && strings.TrimSpace(string(out)) == "" {
		fmt.Fprintln(log, "vm: apt-cache knows no", pattern, "- running apt-get update")
		if b, err := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("apt-get update: %v: %s", err, b)
		}
		out, err = exec.CommandContext(ctx, "apt-cache", "search", "--names-only", pattern).Output()
	}
	if err != nil {
		return nil, fmt.Errorf("apt-cache search %s: %w", pattern, err)
	}
	pkg, err := NewestPackage(string(out))
	if err != nil {
		return nil, fmt.Errorf("%w for %s in Debian's archive (apt sources need bookworm and bookworm-security)", err, pattern)
	}
	k := &Kernel{Package: pkg, Release: ReleaseOf(pkg), Root: filepath.Join(cache, pkg)}
	ready := filepath.Join(k.Root, ".ready")
	if _, err := os.Stat(ready); err == nil {
		return k, nil
	}
	fmt.Fprintf(log, "vm: fetching %s into %s\n", pkg, k.Root)
	if err := os.RemoveAll(k.Root); err != nil {
		return nil, err
	}
	dl, err := os.MkdirTemp(cache, ".download-")
	if err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return nil, err
		}
		if dl, err = os.MkdirTemp(cache, ".download-"); err != nil {
			return nil, err
		}
	}
	defer os.RemoveAll(dl)
	steps := [][]string{
		{"apt-get", "download", "-q", pkg},
		{"sh", "-c", "dpkg-deb -x ./*.deb unpacked"},
		// The kernel loads only plain .ko files from an initramfs-built tree.
		{"sh", "-c", "find unpacked/lib/modules -name '*.ko.xz' -print0 | xargs -0 -r -n 64 -P 2 xz -d"},
		{"depmod", "-b", "unpacked", k.Release},
	}
	for _, s := range steps {
		c := exec.CommandContext(ctx, s[0], s[1:]...)
		c.Dir = dl
		if b, err := c.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, lastLines(string(b), 5))
		}
	}
	if _, err := os.Stat(filepath.Join(dl, "unpacked", "boot", "vmlinuz-"+k.Release)); err != nil {
		return nil, fmt.Errorf("%s has no vmlinuz-%s: %w", pkg, k.Release, err)
	}
	if err := os.Rename(filepath.Join(dl, "unpacked"), k.Root); err != nil {
		return nil, err
	}
	return k, os.WriteFile(ready, []byte(pkg+"\n"), 0o644)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
