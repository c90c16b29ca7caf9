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
	if !HasPin(lab, serviceMapLbStats) {
		return c, ErrNoPrograms
	}
	err := errors.Join(
		ReadPinned(lab, serviceMapLbStats, func(m *ebpf.Map) (err error) { c.IPv4, err = statsOf(m); return }),
		ReadPinned(lab, serviceMapLb6Stats, func(m *ebpf.Map) (err error) { c.IPv6, err = stats6Of(m); return }),
		ReadPinned(lab, serviceMapHostStats, func(m *ebpf.Map) (err error) { c.Host, err = hostStatsOf(m); return }),
	)
	return c, err
}

// HasPin says whether lab's pin directory holds name (on any other error
// than its absence, yes: opening it then says what is wrong).
func HasPin(lab, name string) bool {
	_, err := os.Stat(filepath.Join(PinDir(lab), name))
	return !errors.Is(err, os.ErrNotExist)
}

// ReadPinned opens lab's pinned map name read-only for read (the socket
// programs' maps are pinned beside the tc programs').
func ReadPinned(lab, name string, read func(*ebpf.Map) error) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(lab), name), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("lab %s's %s: %w", lab, name, err)
	}
	defer m.Close()
	return read(m)
}

// readCounters reads the first len(dst) counters of a per-CPU array, summed
// over CPUs, into dst in the map's order: one reader for each family's
// counters (lb_stats, lb6_stats), whose indexes are the structs' fields.
// On an error dst is left as it was.
func readCounters(m *ebpf.Map, what string, dst ...*uint64) error {
	v, err := SumCounters(m, what, len(dst))
	if err != nil {
		return err
	}
	for i, d := range dst {
		*d = v[i]
	}
	return nil
}
