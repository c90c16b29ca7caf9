package binaries

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// module is a pinned Go module of vnetlab's own whose commands are built once
// into dir/bin and kept there.
type module struct {
	what    string            // e.g. "Kubernetes v1.37.2", for messages
	dir     string            // cache directory of this version
	files   map[string][]byte // the module's source: go.mod, go.sum, ...
	pkgs    []string          // packages to build, in one `go build`
	outputs []string          // file names the build leaves in bin
	// tests are test binaries built after pkgs (`go test -c`): file name in
	// bin -> package. Their names belong in outputs too.
	tests   map[string]string
	ldflags string
	// cgo builds with cgo on (a static binary: ldflags then carry
	// -extldflags -static); everything else builds without.
	cgo      bool
	estimate string // how long a first build takes, for the message
	// tags are build tags, comma-separated, for every package.
	tags string
	// names renames what `go build` wrote (named after each package's
	// directory) to the file names in outputs.
	names map[string]string
	// after, when set, runs in the module's source directory once the
	// commands are built, to put more into bin (tmp): files of the module
	// the commands read at run time. What it writes belongs in afterFiles.
	after func(ctx context.Context, goTool, src, tmp string) error
	// afterFiles are files after writes in bin, which a cached bin holds
	// too (data, not commands: they need not be executable).
	afterFiles []string
}

// ensureCommand builds the module mk describes unless it is cached, and
// returns the path of its command name.
func ensureCommand(ctx context.Context, say func(string, ...any), mk func() (module, error), name string) (string, error) {
	m, err := mk()
	if err != nil {
		return "", err
	}
	bin, err := m.ensure(ctx, say)
	if err != nil {
		return "", err
	}
	return filepath.Join(bin, name), nil
}

// cached returns dir/bin when every output is there, or "".
func (m module) cached() string {
	bin := filepath.Join(m.dir, "bin")
	for _, c := range m.outputs {
		if fi, err := os.Stat(filepath.Join(bin, c)); err != nil || fi.Mode()&0o111 == 0 {
			return ""
		}
	}
	for _, f := range m.afterFiles {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			return ""
		}
	}
	return bin
}

// ensure builds the module's commands unless they are cached and returns
// their directory. The build writes to bin.building and renames it, so an
// interrupted build never looks finished.
func (m module) ensure(ctx context.Context, say func(string, ...any)) (string, error) {
	if bin := m.cached(); bin != "" {
		return bin, nil
	}
	// One build of a version at a time: a second process (two kube up at
	// once, or a test beside them) would remove the first's bin.building
	// under it. It waits, then finds the first's build.
	unlock, err := m.lock(say)
	if err != nil {
		return "", err
	}
	defer unlock()
	if bin := m.cached(); bin != "" {
		return bin, nil
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%s is not built yet and building it needs the Go toolchain (go 1.26+) in PATH: install Go, or run once as a user who has it", m.what)
	}
	src := filepath.Join(m.dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	for name, b := range m.files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", err
		}
	}
	tmp := filepath.Join(m.dir, "bin.building")
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	flags := []string{"-trimpath", "-ldflags", m.ldflags}
	if m.tags != "" {
		flags = append(flags, "-tags", m.tags)
	}
	runs := [][]string{append(append(append([]string{"build"}, flags...), "-o", tmp+"/"), m.pkgs...)}
	for file, pkg := range m.tests {
		runs = append(runs, append(append([]string{"test", "-c"}, flags...), "-o", filepath.Join(tmp, file), pkg))
	}
	say("building %s from the Go module proxy into %s: the first time takes %s", m.what, m.dir, m.estimate)
	start := time.Now()
	// cpu: the go commands' CPU, with the compilers and linkers they waited for.
	var cpu time.Duration
	for _, args := range runs {
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = src
		cgo := "CGO_ENABLED=0"
		if m.cgo {
			cgo = "CGO_ENABLED=1"
		}
		cmd.Env = append(os.Environ(), cgo, "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState != nil {
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if err != nil {
			_ = os.RemoveAll(tmp)
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", m.buildError(err, out)
		}
	}
	for from, to := range m.names {
		if err := os.Rename(filepath.Join(tmp, from), filepath.Join(tmp, to)); err != nil {
			_ = os.RemoveAll(tmp)
			return "", err
		}
	}
	if m.after != nil {
		if err := m.after(ctx, goTool, src, tmp); err != nil {
			_ = os.RemoveAll(tmp)
			return "", fmt.Errorf("%s: %w", m.what, err)
		}
	}
	bin := filepath.Join(m.dir, "bin")
	_ = os.RemoveAll(bin)
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	say("built %s in %s (%s of CPU)", m.what, time.Since(start).Round(time.Second), cpu.Round(time.Second))
	return bin, nil
}

// buildError is a failed build's error, in one line: go's output without
// its progress lines ("go: downloading ..."), its lines joined and cut to
// the last 800 bytes; when go could not fetch a module (the Go module proxy
// unreachable, GOPROXY=off, nothing in the module cache), it says so first.
func (m module) buildError(err error, out []byte) error {
	var lines []string
	fetch := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "go: downloading ") {
			continue
		}
		lines = append(lines, l)
		if fetch == "" && (strings.Contains(l, `: Get "`) || strings.Contains(l, "module lookup disabled") ||
			strings.Contains(l, ": reading http") || strings.Contains(l, "dial tcp")) {
			fetch = l
		}
	}
	if fetch != "" {
		proxy := os.Getenv("GOPROXY")
		if proxy == "" {
			proxy = "go's default, proxy.golang.org"
		}
		return fmt.Errorf("building %s needs its Go modules, from the module cache or the Go module proxy (GOPROXY: %s), and could not fetch them: %s", m.what, proxy, fetch)
	}
	msg := strings.Join(lines, " | ")
	if len(msg) > 800 {
		msg = "..." + msg[len(msg)-800:]
	}
	return fmt.Errorf("building %s failed (%v): %s", m.what, err, msg)
}

// lock takes the version directory's build lock (dir/.build.lock), saying
// so when another process holds it; the returned func releases it.
func (m module) lock(say func(string, ...any)) (func(), error) {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(m.dir, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("the build lock of %s: %w", m.what, err)
	}
	fd := int(f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		say("waiting for another process that is building %s into %s", m.what, m.dir)
		for err = unix.Flock(fd, unix.LOCK_EX); err == unix.EINTR; err = unix.Flock(fd, unix.LOCK_EX) {
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("the build lock of %s: %w", m.what, err)
		}
	}
	return func() { _ = unix.Flock(fd, unix.LOCK_UN); f.Close() }, nil
}

// cacheRoot is ~/.cache/vnetlab/kube (or $VNETLAB_KUBE_CACHE).
func cacheRoot() (string, error) {
	if d := os.Getenv("VNETLAB_KUBE_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the Kubernetes binaries (%v): set VNETLAB_KUBE_CACHE", err)
	}
	return filepath.Join(base, "vnetlab", "kube"), nil
}
