package tcbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// Counters are a lab's tc programs' counters, summed over CPUs since its
// maps were created: the Service translation per family and host routing.
type Counters struct {
	IPv4 Stats     `json:"ipv4"`
	IPv6 Stats6    `json:"ipv6"`
	Host HostStats `json:"host_routing"`
}

// ErrNoPrograms: the lab has no tc programs' maps (no eBPF mode, no ebpf
// provider).
var ErrNoPrograms = errors.New("no eBPF programs")

// ReadCounters reads lab's counters from its pinned maps, read-only: it
// loads no program and creates nothing (unlike Open).
func ReadCounters(lab string) (Counters, error) {
	var c Counters
	if _, err := os.Stat(filepath.Join(PinDir(lab), serviceMapLbStats)); errors.Is(err, os.ErrNotExist) {
		return c, ErrNoPrograms
	}
	read := func(name string, into func(*ebpf.Map) error) error {
		m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(lab), name), &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			return fmt.Errorf("lab %s's %s: %w", lab, name, err)
		}
		defer m.Close()
		return into(m)
	}
	err := errors.Join(
		read(serviceMapLbStats, func(m *ebpf.Map) (err error) { c.IPv4, err = statsOf(m); return }),
		read(serviceMapLb6Stats, func(m *ebpf.Map) (err error) { c.IPv6, err = stats6Of(m); return }),
		read(serviceMapHostStats, func(m *ebpf.Map) (err error) { c.Host, err = hostStatsOf(m); return }),
	)
	return c, err
}
