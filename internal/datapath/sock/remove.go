package sock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Remove takes the socket programs off lab's plane, from its pins alone
// (no program is loaded, so a plane made by another vnetlab build goes
// too): every link pinned under LinksDir detached, then the socket
// programs' own maps (sock_*, sock6_*) unpinned. The tc programs' maps,
// which the socket programs shared, stay. A local cluster whose node
// changes its Service proxy (kube set-proxy) calls it.
func Remove(lab string) error {
	dir := tcbpf.PinDir(lab)
	var errs []error
	links, err := os.ReadDir(filepath.Join(dir, LinksDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range links {
		pin := filepath.Join(dir, LinksDir, e.Name())
		l, err := link.LoadPinnedLink(pin, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("open link %s: %w", pin, err))
			continue
		}
		// Explicitly: dropping the pin detaches only once bpffs frees it.
		if err := l.Detach(); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w", pin, err))
		}
		l.Close()
	}
	if err := os.RemoveAll(filepath.Join(dir, LinksDir)); err != nil {
		errs = append(errs, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range ents {
		if IsSockPin(e.Name()) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// IsSockPin says whether name, in a plane's pin directory, is the socket
// programs': their links' directory (LinksDir) or one of their own maps
// (bpf/sock*.h: sock_*, sock6_*), which the tc programs never read.
func IsSockPin(name string) bool {
	return name == LinksDir || strings.HasPrefix(name, "sock_") || strings.HasPrefix(name, "sock6_")
}
