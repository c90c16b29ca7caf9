package tcbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// FlowMaps are the maps of a plane that remember flows rather than
// configuration: the pods' and the NodePort programs' conntrack, session
// affinity, fragments, and the flows host routing leaves to the node's
// stack (host_via_stack). A plane whose Service proxy changes (kube
// set-proxy) has them emptied: a flow the old proxy translated must not
// keep its binding under the new one.
var FlowMaps = []string{
	serviceMapLbConntrack, serviceMapLb6Conntrack, serviceMapLbAffinity, serviceMapLb6Affinity,
	serviceMapLbFrags, serviceMapLb6Frags, serviceMapNpConntrack, serviceMapNp6Conntrack,
	serviceMapHostViaStack, serviceMapHostViaStack6,
}

// ClearFlows empties lab's FlowMaps, from their pins (it opens no plane,
// so a plane made by another vnetlab build is cleared too; a map not
// pinned is skipped). It returns how many entries it deleted. Entries
// made while it runs (a flow still sending) may stay: call it once the
// Service maps are empty.
func ClearFlows(lab string) (int, error) {
	total := 0
	var errs []error
	for _, name := range FlowMaps {
		n, err := clearPinned(lab, name)
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// clearPinned empties lab's pinned map name (none pinned: nothing to do)
// and says how many entries it deleted.
func clearPinned(lab, name string) (int, error) {
	path := filepath.Join(PinDir(lab), name)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer m.Close()
	n, err := clearMap(m)
	if err != nil {
		return n, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// clearMap deletes every entry of hash map m: its keys are read first
// (following each key to the next: deleting as it goes would restart the
// kernel's walk at the first bucket each time), then deleted. A second
// pass takes what was added meanwhile.
func clearMap(m *ebpf.Map) (int, error) {
	deleted := 0
	for pass := 0; pass < 2; pass++ {
		keys, err := mapKeys(m)
		if err != nil {
			return deleted, err
		}
		if len(keys) == 0 {
			break
		}
		for _, k := range keys {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return deleted, err
			}
			deleted++
		}
	}
	return deleted, nil
}

// mapKeys lists m's keys, each once (a walk that restarts, as the kernel's
// does when the key it follows was evicted meanwhile, sees some twice).
func mapKeys(m *ebpf.Map) ([][]byte, error) {
	seen := map[string]bool{}
	var keys [][]byte
	k, err := m.NextKeyBytes(nil)
	for steps := 0; k != nil && err == nil; steps++ {
		if steps > 4*int(m.MaxEntries())+16 {
			return keys, fmt.Errorf("listing its keys did not end after %d steps", steps)
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
		k, err = m.NextKeyBytes(k)
	}
	return keys, err
}
