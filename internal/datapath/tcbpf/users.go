package tcbpf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Users says what still uses the plane besides the process asking: pins
// under its subdirectories (programs on interfaces: endpoints, uplinks,
// socket links), Services and pod routes in its maps, other processes
// holding its maps (a running Service proxy). Empty: removing the plane
// (Remove) takes nothing from anyone. The CNI plugin's GC asks it before
// removing a node's plane.
func (p *Plane) Users() ([]string, error) {
	var out []string
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	ids := map[uint32]bool{}
	for _, e := range ents {
		path := filepath.Join(p.dir, e.Name())
		if e.IsDir() {
			if sub, err := os.ReadDir(path); err == nil && len(sub) > 0 {
				out = append(out, fmt.Sprintf("%d pins under %s", len(sub), path))
			}
			continue
		}
		if id, ok := pinnedMapID(path); ok {
			ids[id] = true
		}
	}
	if ss, err := p.ListServices(); err != nil {
		return nil, err
	} else if len(ss) > 0 {
		out = append(out, fmt.Sprintf("%d Services in its maps", len(ss)))
	}
	if rs, err := p.Routes(); err != nil {
		return nil, err
	} else if len(rs) > 0 {
		out = append(out, fmt.Sprintf("%d pod routes in its maps", len(rs)))
	}
	for _, pid := range proc.HoldingBPFMaps(ids) {
		out = append(out, fmt.Sprintf("process %d holds its maps", pid))
	}
	return out, nil
}

// pinnedMapID is the kernel's ID of the map pinned at path.
func pinnedMapID(path string) (uint32, bool) {
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return 0, false
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return 0, false
	}
	id, ok := info.ID()
	return uint32(id), ok
}
