package tcbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
)

// ipv6Maps are the plane's IPv6 hash maps: made with one entry on a plane
// for IPv4 only (OpenFamily), where nothing writes or reads them. At their
// full size they were 57% of a node's proxy maps on an IPv4 cluster
// (93 of 164 MB, most of it the preallocated LRU conntracks).
// The IPv6 arrays keep their size: lb6_vip16 is read at every packet.
var ipv6Maps = []string{
	serviceMapLb6Services, serviceMapLb6Backends, serviceMapLb6Slots, serviceMapLb6Conntrack, serviceMapLb6Affinity,
	serviceMapLb6Frags, serviceMapNp6Conntrack, serviceMapHostViaStack6, serviceMapPodRoutes6,
}

// SizeMaps sizes, before a load with the lab's pins in dir, the maps of
// spec whose size follows the plane's family: the plane's IPv6 maps
// (ipv6Maps) and more (another program's own IPv6 maps). One already
// pinned gets the size it was made with: whoever made the plane chose it,
// and a later process adopts it whatever family it was told (or the load
// would call the pin incompatible). One not pinned yet gets one entry
// unless the plane carries IPv6 (v6). The other maps keep their spec's
// size.
func SizeMaps(spec *ebpf.CollectionSpec, dir string, v6 bool, more ...string) error {
	for _, name := range slices.Concat(ipv6Maps, more) {
		m, ok := spec.Maps[name]
		if !ok || m.Pinning != ebpf.PinByName {
			continue
		}
		pin, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), &ebpf.LoadPinOptions{ReadOnly: true})
		switch {
		case err == nil:
			m.MaxEntries = pin.MaxEntries()
			pin.Close()
		case errors.Is(err, os.ErrNotExist):
			if !v6 {
				m.MaxEntries = 1
			}
		default:
			return fmt.Errorf("ebpf: pinned map %s: %w", filepath.Join(dir, name), err)
		}
	}
	return nil
}

// HasIPv6 says whether the plane carries IPv6: its IPv6 maps were made at
// their full size (OpenFamily).
func (p *Plane) HasIPv6() bool { return p.objs.Lb6Services.MaxEntries() > 1 }
