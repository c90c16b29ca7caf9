// Package tcx attaches tc programs through tcx links pinned in bpffs (the
// attachment outlives the process that made it) and detaches them by their
// pins. The Service programs (tcbpf) and the policy programs (polbpf) both
// attach this way.
package tcx

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Attach attaches prog at at of interface ifindex of namespace ns (a name
// under /run/netns or a path; tcx resolves an ifindex in the caller's
// namespace, so the attach is made in ns) and pins the link at pin. A kernel
// without tcx fails with an error that wraps ebpf.ErrNotSupported.
func Attach(ns string, ifindex int, prog *ebpf.Program, at ebpf.AttachType, pin string) error {
	return nsutil.Do(ns, func() error {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at})
		if err != nil {
			return err
		}
		defer l.Close()
		return l.Pin(pin)
	})
}

// Detach detaches the link pinned at pin, explicitly: a dropped pin alone
// detaches only when bpffs frees it, an RCU grace period later. No pin is
// nothing to detach. The pin itself stays for the caller to remove.
func Detach(pin string) error {
	l, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open link %s: %w", pin, err)
	}
	defer l.Close()
	if err := l.Detach(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("detach %s: %w", pin, err)
	}
	return nil
}

// Dir lists the names in dir, a plane's directory of pinned links (or of
// an interface's directories of them): none when it does not exist, as
// before anything was attached.
func Dir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// Linked says whether the link pinned at pin still holds an interface (a
// tcx link's ifindex reads 0 once its interface has gone).
func Linked(pin string) bool {
	l, err := link.LoadPinnedLink(pin, nil)
	if err != nil {
		return false
	}
	defer l.Close()
	info, err := l.Info()
	return err == nil && info.TCX() != nil && info.TCX().Ifindex != 0
}
