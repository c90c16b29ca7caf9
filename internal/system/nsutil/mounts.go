package nsutil

// How named namespaces share /run/netns with iproute2 and other tools.
//
// `ip netns add` makes /run/netns a shared, recursive bind mount of itself
// whenever it is not a mount point yet. A namespace mounted on the plain
// directory before that stays mounted there, on the lower copy of the
// directory, while the bind copies it on top: unmounting the path then
// removes the copy only, and the entry can neither be removed (EBUSY: the
// lower mount still sits on it) nor entered (EINVAL: what the path shows is
// the plain file). So vnetlab makes the mount point itself, as iproute2
// does, before its first namespace (ensureDir), and removes an entry from
// the lower copy too when one is there (unmountCovered).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// ensureDir creates Dir and, when it is not a mount point, makes it a shared
// recursive bind mount of itself, exactly as `ip netns add` does: under a
// lock on the directory (iproute2 takes the same one, so that concurrent
// callers do not stack bind mounts), mount it shared; if that fails because
// it is not a mount point, bind it onto itself and try again. A Dir that is
// a mount point already is left as its owner made it.
func ensureDir() error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return err
	}
	if mounted, err := mountinfo.Mounted(Dir); err == nil && mounted {
		return nil
	}
	// Like iproute2, go on without the lock if it cannot be had.
	if lock, err := os.Open(Dir); err == nil {
		defer lock.Close()
		for unix.Flock(int(lock.Fd()), unix.LOCK_EX) == unix.EINTR {
		}
	}
	bound := false
	for {
		err := unix.Mount("", Dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINVAL) || bound {
			return fmt.Errorf("make %s a shared mount (as ip netns add does): %w", Dir, err)
		}
		if err := unix.Mount(Dir, Dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto itself (as ip netns add does): %w", Dir, err)
		}
		bound = true
	}
}

// unmountCovered unmounts what is still mounted at path p (an entry of Dir)
// though no path reaches it: a namespace mounted on the lower copy of Dir
// before another tool bind-mounted Dir onto itself.
//
// Mounts are only reachable through paths, and every path to the entry
// crosses the bind on top; a private mount namespace would see copies only
// (unmounting them frees nothing here), and with shared propagation
// unmounting its copy of the bind would unmount the real /run/netns and
// every other tool's entries. What reaches the lower copy is a file handle:
// the bind on top is the same directory, so its handle, opened through the
// mount beneath (open_by_handle_at takes the mount from the descriptor it
// is given), is the directory as that mount sees it; the entry looked up
// from there is the covered namespace mount, unmounted through its
// descriptor. Unmounting it propagates to its peers only, which are the
// same entry elsewhere.
func unmountCovered(p string) error {
	for tries := 0; tries < 8; tries++ {
		mounts, err := MountsAt(p)
		if err != nil || len(mounts) == 0 {
			return err
		}
		if err := unmountBeneath(p, mounts[0]); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: still mounted after 8 unmounts: %s", p, describeMounts(p))
}

// unmountBeneath unmounts m, a mount at p on a mount that another covers.
func unmountBeneath(p string, m *mountinfo.Info) error {
	parent, err := mountByID(m.Parent)
	if err != nil {
		return err
	}
	cannot := func(why string, a ...any) error {
		return fmt.Errorf("%s: mount %d (%s) sits on mount %d at %s, under another mount, and %s",
			p, m.ID, m.Root, parent.ID, parent.Mountpoint, fmt.Sprintf(why, a...))
	}
	pfd, err := openMount(parent.Mountpoint, parent.ID)
	if err != nil {
		return cannot("cannot be reached: %v", err)
	}
	defer unix.Close(pfd)
	dir := filepath.Dir(p)
	var top, under unix.Stat_t
	if err := unix.Stat(dir, &top); err != nil {
		return err
	}
	if err := unix.Fstat(pfd, &under); err != nil {
		return err
	}
	if top.Dev != under.Dev {
		// A file handle names an inode of one file system only.
		return cannot("%s is now another file system: unmount that first", dir)
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, dir, 0)
	if err != nil {
		return cannot("no file handle for %s: %v", dir, err)
	}
	dfd, err := unix.OpenByHandleAt(pfd, h, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return cannot("open %s beneath: %v", dir, err)
	}
	defer unix.Close(dfd)
	var got unix.Stat_t
	if err := unix.Fstat(dfd, &got); err != nil || got.Ino != top.Ino || mountID(dfd) != parent.ID {
		return cannot("%s could not be opened on it", dir)
	}
	efd, err := unix.Openat(dfd, filepath.Base(p), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return cannot("open the entry beneath: %v", err)
	}
	defer unix.Close(efd)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(efd, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return cannot("what is mounted there is not a namespace: left alone")
	}
	if err := unix.Unmount(fmt.Sprintf("/proc/self/fd/%d", efd), unix.MNT_DETACH); err != nil {
		return cannot("unmount: %v", err)
	}
	return nil
}

// openMount opens path, which must be the root of mount id (not covered).
func openMount(path string, id int) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // not O_PATH: open_by_handle_at wants a real descriptor
	if err != nil {
		return -1, err
	}
	if got := mountID(fd); got != id {
		unix.Close(fd)
		return -1, fmt.Errorf("%s shows mount %d: mount %d is covered too", path, got, id)
	}
	return fd, nil
}

// mountID is the mount a descriptor is on (the first field of mountinfo).
func mountID(fd int) int {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return -1
	}
	return int(stx.Mnt_id)
}

// MountsAt lists every mount whose mount point is p, stacked or covered
// ones too (mountinfo's SingleEntryFilter stops at the first).
func MountsAt(p string) ([]*mountinfo.Info, error) {
	return mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) { return m.Mountpoint != p, false })
}

func mountByID(id int) (*mountinfo.Info, error) {
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) { return m.ID != id, m.ID == id })
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("mount %d is gone", id)
	}
	return ms[0], nil
}

// describeMounts says what is mounted at p and on what, for an error that
// names the real reason an entry cannot go.
func describeMounts(p string) string {
	ms, err := MountsAt(p)
	if err != nil {
		return err.Error()
	}
	if len(ms) == 0 {
		return "nothing is mounted there"
	}
	var out []string
	for _, m := range ms {
		on := fmt.Sprintf("mount %d", m.Parent)
		if parent, err := mountByID(m.Parent); err == nil {
			on += " at " + parent.Mountpoint
			if parent.Mountpoint != Dir {
				on += fmt.Sprintf(" (the lower copy of %s, covered by a bind mount of it)", Dir)
			}
		}
		out = append(out, fmt.Sprintf("mount %d of %s on %s", m.ID, m.Root, on))
	}
	return strings.Join(out, "; ")
}

// MountedEntries lists the entries of Dir that are mount points in this
// mount namespace, also those covered by a later mount of Dir (which no
// directory listing shows twice): what a test checks is gone.
func MountedEntries(prefix string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(Dir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if filepath.Dir(m.Mountpoint) == Dir && strings.HasPrefix(filepath.Base(m.Mountpoint), prefix) {
			out = append(out, fmt.Sprintf("%s (mount %d on %d)", m.Mountpoint, m.ID, m.Parent))
		}
	}
	return out, nil
}
