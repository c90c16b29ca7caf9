package cluster

// `vnetlab kube cilium-exec`: what each Cilium daemon of a cluster runs
// first, in the namespace it was started in.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// CiliumExec replaces this process with argv in a mount namespace of its
// own (private: nothing it mounts is seen elsewhere) where run is bound on
// /run/cilium, cgroupDir (if not "") on the agent's cgroup root, and
// /proc/sys is read-only but for /proc/sys/net (the network namespace's
// own). It refuses to exec while any CiliumLockedSysctls can be opened for
// writing there; the check opens them and writes nothing.
func CiliumExec(run, cgroupDir string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("cilium-exec: no program")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	// The mount namespace is this thread's: it stays locked to this
	// goroutine until exec.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("cilium-exec: unshare the mount namespace: %w", err)
	}
	mounts := []bindMount{{"", "/", unix.MS_REC | unix.MS_PRIVATE}, {run, CiliumRun, unix.MS_BIND}}
	if cgroupDir != "" {
		if err := os.MkdirAll(filepath.Join(run, filepath.Base(ciliumCgroupMount)), 0o755); err != nil {
			return err
		}
		mounts = append(mounts, bindMount{cgroupDir, ciliumCgroupMount, unix.MS_BIND})
	}
	mounts = append(mounts,
		bindMount{"/proc/sys", "/proc/sys", unix.MS_BIND},
		bindMount{"", "/proc/sys", unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY},
		bindMount{"/proc/sys/net", "/proc/sys/net", unix.MS_BIND},
		bindMount{"", "/proc/sys/net", unix.MS_REMOUNT | unix.MS_BIND})
	for _, m := range mounts {
		if err := unix.Mount(m.src, m.dst, "", m.flags, ""); err != nil {
			return fmt.Errorf("cilium-exec: mount %q on %s (flags %#x): %w", m.src, m.dst, m.flags, err)
		}
	}
	if err := lockedSysctlsReadOnly(); err != nil {
		return err
	}
	return unix.Exec(path, argv, os.Environ())
}

// bindMount is one mount(2) call of CiliumExec.
type bindMount struct {
	src, dst string
	flags    uintptr
}

// lockedSysctlsReadOnly fails unless every CiliumLockedSysctls refuses to be
// opened for writing with EROFS.
func lockedSysctlsReadOnly() error {
	for _, s := range CiliumLockedSysctls {
		p := filepath.Join("/proc/sys", strings.ReplaceAll(s, ".", "/"))
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
			return fmt.Errorf("cilium-exec: %s is writable in the new mount namespace: not starting the program", p)
		}
		if !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("cilium-exec: %s: %v, want a read-only file system: not starting the program", p, err)
		}
	}
	return nil
}
