// Package nsutil creates, enters and removes named network namespaces the way
// `ip netns` does (a bind mount under /run/netns, which is a shared mount
// point of its own: mounts.go), without forking ip.
package nsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Dir is where named namespaces live (same place as iproute2 uses).
const Dir = "/run/netns"

// Path returns the bind-mount path of a named namespace; an absolute path
// (a CNI runtime's netns, /proc/PID/ns/net) is returned as it is.
func Path(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(Dir, name)
}

// Exists reports whether a named namespace file exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Create makes a new named namespace, writes sysctls (key, value, key,
// value, ...) inside it, brings its loopback up and writes mark as the
// loopback's alias (vnetlab's ownership mark, readable with `ip link`).
// The calling goroutine's thread is restored to its original namespace.
func Create(name, mark string, sysctls ...string) error {
	if err := ensureDir(); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	enter := func() error {
		ns, err := netns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		ns.Close() // the bind mount holds it
		return nil
	}
	// Inside the new namespace: mark and configure it while there.
	return inside(enter, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil && mark != "" {
			err = netlink.LinkSetAlias(lo, mark)
		}
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		for i := 0; i+1 < len(sysctls) && err == nil; i += 2 {
			err = WriteSysctl(sysctls[i], sysctls[i+1])
		}
		return err
	})
}

// inside runs fn with the calling goroutine's thread in the namespace
// enter moves it to, then moves it back. A thread that cannot go back (or
// whose fn panicked) is in the wrong namespace: it stays locked to its
// goroutine, so it ends with it (runtime.Goexit) and no other goroutine
// ever runs on it.
func inside(enter, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	ferr := enter()
	if ferr == nil {
		ferr = fn()
	}
	if err := netns.Set(orig); err != nil {
		runtime.Goexit()
	}
	runtime.UnlockOSThread()
	return ferr
}

// Delete unmounts and removes a named namespace. Missing namespaces are not
// an error. A namespace mounted before another tool turned Dir into a mount
// point is mounted twice, the copy on top and the original beneath: both go
// (unmountCovered). An entry that cannot go says what holds it.
func Delete(name string) error {
	p := Path(name)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	// MNT_DETACH: the mount goes now (and, by propagation, its copies in
	// peer mount namespaces); the namespace is freed once nothing uses it.
	for i := 0; i < 8; i++ {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break // no mount (left) at the path
			}
			return fmt.Errorf("unmount %s: %w (%s)", p, err, describeMounts(p))
		}
	}
	err := os.Remove(p)
	if errors.Is(err, unix.EBUSY) {
		if err := unmountCovered(p); err != nil {
			return err
		}
		err = os.Remove(p)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w: still mounted: %s", err, describeMounts(p))
		}
		return err
	}
	return nil
}

// Do runs fn with the calling thread inside the named namespace.
func Do(name string, fn func() error) error { return DoPath(Path(name), fn) }

// DoPath runs fn with the calling thread inside the namespace bound at path
// (a /run/netns entry, or /proc/PID/ns/net).
func DoPath(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer target.Close()
	return inside(func() error {
		if err := netns.Set(target); err != nil {
			return fmt.Errorf("enter namespace %s: %w", path, err)
		}
		return nil
	}, fn)
}

// Mark returns the ownership mark (loopback alias) of a named namespace.
func Mark(name string) string {
	var alias string
	_ = Do(name, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			alias = lo.Attrs().Alias
		}
		return err
	})
	return alias
}

// Scratch runs fn in a fresh anonymous namespace that disappears afterwards
// (used to probe kernel features without touching any real namespace).
func Scratch(fn func() error) error {
	return inside(func() error {
		ns, err := netns.New()
		if err != nil {
			return fmt.Errorf("create scratch namespace: %w", err)
		}
		ns.Close() // the thread holds it until it leaves
		return nil
	}, fn)
}

// Handle opens a netlink handle bound to the named namespace. Close it when done.
// It speaks rtnetlink only (links, addresses, routes, neighbours, qdiscs):
// one socket, where a handle for every family would hold three, per pod of
// a lab that keeps one handle per pod open while it builds.
func Handle(name string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(Path(name))
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", name, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
}

// Inode identifies a namespace; processes whose /proc/PID/ns/net has the same
// inode live inside it.
func Inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Sysctl writes a value under /proc/sys inside the named namespace
// (net.* sysctls are per namespace; the root namespace is never touched).
func Sysctl(ns, key, value string) error {
	return Do(ns, func() error { return WriteSysctl(key, value) })
}

// WriteSysctl writes key (dotted or slashed) in the current thread's namespace.
func WriteSysctl(key, value string) error {
	p := sysctlPath(key)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// ReadSysctl reads a sysctl inside the named namespace.
func ReadSysctl(ns, key string) (string, error) {
	var out string
	err := Do(ns, func() error {
		var err error
		out, err = CurrentSysctl(key)
		return err
	})
	return out, err
}

// CurrentSysctl reads key (dotted or slashed) in the current thread's
// namespace, without its trailing newline.
func CurrentSysctl(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	return string(trimNL(b)), err
}

func sysctlPath(key string) string {
	b := []byte(key)
	// dots separate components, except inside interface names which we never use with dots
	for i := range b {
		if b[i] == '.' {
			b[i] = '/'
		}
	}
	return filepath.Join("/proc/sys", string(b))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// FD opens the namespace file (for netlink attributes that take an fd).
func FD(name string) (netns.NsHandle, error) {
	return netns.GetFromPath(Path(name))
}

// IsNamespace reports whether the named path is a mounted namespace (nsfs).
func IsNamespace(name string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(Path(name), &fs); err != nil {
		return false
	}
	return fs.Type == unix.NSFS_MAGIC
}
