// Package tcbpf is vnetlab's own Service data plane: the tc programs of
// bpf/service.c (clusterIP:port -> backend DNAT with a BPF conntrack and
// reverse NAT, see bpf/lb.h for the design), their maps pinned per lab under
// /sys/fs/bpf/vnetlab/<lab>/ so that a later CLI process changes a running
// lab, and their attachment to pod interfaces; also the eBPF modes' host
// routing (hostroute.go). internal/datapath/modes's eBPF modes (veth-ebpf,
// macvlan-ebpf) attach it as they build a lab; internal/platform/labservice's ebpf
// provider fills its Service maps.
//
// The Service maps, one file per concern: svc.go (an entry: Service,
// Backend, Proto, Validate), svcmaps.go (each family's maps: keys, values,
// addresses in network order), svcwrite.go (every write: AddServices,
// UpdateService, DelEntry; outside tests only internal/datapath/svcsync
// calls them), svcfilters.go (the prefilters every write keeps counted),
// svcread.go (ListServices), counters.go (Stats, Stats6, ReadCounters),
// conntrack.go (Flows).
package tcbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// BPFFS is where bpffs is mounted; Root holds one directory per lab (the
// same place internal/platform/lab's teardown removes).
const (
	BPFFS = "/sys/fs/bpf"
	Root  = BPFFS + "/vnetlab"
)

// HairpinIP is the source address a pod sees on a connection it made to its
// own Service (LB_HAIRPIN_IP in bpf/lb.h; Cilium uses the same).
const HairpinIP = "169.254.42.1"

// HairpinIP6 is HairpinIP for IPv6 (bpf/lb6.h's LB6_HAIRPIN_IP): in the
// discard-only prefix 100::/64 (RFC 6666), which no real host has.
const HairpinIP6 = "100::a9fe:2a01"

// PinDir is the bpffs directory of a lab's maps and links.
func PinDir(lab string) string { return filepath.Join(Root, lab) }

// Plane is a lab's Service data plane, opened by one process.
type Plane struct {
	// Hook chooses how AttachEndpoint attaches; "" = tcx where the kernel
	// has it, else tc.
	Hook Hook

	lab     string
	dir     string
	objs    serviceObjects // the maps from Open; the programs once an attachment needs them (programs)
	created []string
}

// Open creates the lab's maps, or reuses the maps a previous process
// pinned (services and conntrack survive between CLI calls). It loads no
// program: a Service's write (`svc add`, a proxy's sync) needs only the
// maps, and the kernel's verifier took 1.7 s of system time to load them
// all on every `svc add` (measured here); the attachments load them on
// first use (programs). The two tail-call arrays (lb6_tail, host6_tail)
// hold programs, so they are opened empty here (a pinned one keeps what it
// holds) and filled when the programs are loaded. It mounts bpffs at
// /sys/fs/bpf when nothing is mounted there.
//
// Maps it creates are made for both families; OpenFamily makes an
// IPv4-only plane's IPv6 maps with one entry. A plane opened again keeps
// the sizes it was made with, whichever is called.
func Open(lab string) (*Plane, error) { return OpenFamily(lab, family.Dual) }

// OpenFamily is Open for a lab or node of family fam: the maps this call
// creates are sized for it (SizeMaps).
func OpenFamily(lab string, fam family.Family) (*Plane, error) {
	if lab == "" || filepath.Base(lab) != lab {
		return nil, fmt.Errorf("ebpf: bad lab name %q", lab)
	}
	if err := MountBPFFS(); err != nil {
		return nil, err
	}
	dir := PinDir(lab)
	p := &Plane{lab: lab, dir: dir}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("ebpf: pin directory: %w", err)
		}
		p.created = append(p.created, dir)
	}
	spec, err := loadService()
	if err != nil {
		return nil, err
	}
	var fresh []string
	for name := range spec.Maps {
		if spec.Maps[name].Pinning == ebpf.PinByName {
			if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
				fresh = append(fresh, filepath.Join(dir, name))
			}
		}
	}
	for _, m := range spec.Maps {
		if m.Type == ebpf.ProgramArray {
			m.Contents = nil // filled with the programs (programs)
		}
	}
	if err := SizeMaps(spec, dir, fam.HasIPv6()); err != nil {
		return nil, err
	}
	if err := p.load(spec, &p.objs.serviceMaps); err != nil {
		return nil, err
	}
	p.created = append(p.created, fresh...)
	if !slices.Contains(fresh, filepath.Join(dir, serviceMapLbServices)) {
		if err := p.rebuildFilters(fresh); err != nil {
			p.Close()
			return nil, fmt.Errorf("ebpf: lab %s: prefilters: %w", lab, err)
		}
	}
	return p, nil
}

// load loads what objs asks for of spec, its maps from the lab's pins.
func (p *Plane) load(spec *ebpf.CollectionSpec, objs any) error {
	err := spec.LoadAndAssign(objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: p.dir}})
	if err == nil {
		return nil
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("ebpf: the kernel's verifier rejected vnetlab's service programs: %+v", ve)
	}
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return fmt.Errorf("ebpf: lab %s's pinned maps in %s were made by another vnetlab build (%v): recreate the lab (vnetlab down %s; vnetlab up ...)", p.lab, p.dir, err, p.lab)
	}
	return fmt.Errorf("ebpf: load service programs: %w", err)
}

// programs loads the plane's programs on their first use (an attachment),
// on the lab's pinned maps, and fills the tail-call arrays.
func (p *Plane) programs() (*servicePrograms, error) {
	if p.objs.FromPod != nil {
		return &p.objs.servicePrograms, nil
	}
	spec, err := loadService()
	if err != nil {
		return nil, err
	}
	// The tail-call arrays are filled as the programs load: cilium/ebpf
	// wants them assigned (an array whose last reference closes is emptied
	// by the kernel; the lab's pin holds one).
	var o struct {
		servicePrograms
		Lb6Tail   *ebpf.Map `ebpf:"lb6_tail"`
		Host6Tail *ebpf.Map `ebpf:"host6_tail"`
	}
	if err := SizeMaps(spec, p.dir, p.HasIPv6()); err != nil {
		return nil, err
	}
	if err := p.load(spec, &o); err != nil {
		return nil, err
	}
	p.objs.servicePrograms = o.servicePrograms
	p.objs.Lb6Tail.Close()
	p.objs.Host6Tail.Close()
	p.objs.Lb6Tail, p.objs.Host6Tail = o.Lb6Tail, o.Host6Tail
	return &p.objs.servicePrograms, nil
}

// Created lists the bpffs paths this Open created (for the lab's journal).
// AttachEndpoint returns its own pins in Endpoint.Pins.
func (p *Plane) Created() []string { return append([]string(nil), p.created...) }

// Dir is the lab's pin directory.
func (p *Plane) Dir() string { return p.dir }

// Close releases this process's handles. Pinned maps and links stay: the
// lab keeps working until it is torn down (or Remove is called).
func (p *Plane) Close() error { return p.objs.Close() }

// Remove deletes a lab's pins: this detaches its tcx links and frees its
// maps once no program uses them. internal/platform/lab's teardown does the same.
func Remove(lab string) error {
	if lab == "" || filepath.Base(lab) != lab {
		return fmt.Errorf("ebpf: bad lab name %q", lab)
	}
	return os.RemoveAll(PinDir(lab))
}

// MountBPFFS mounts bpffs at /sys/fs/bpf unless it already is (this touches
// no network: it is the filesystem pins live in).
func MountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(BPFFS, 0o755); err != nil {
		return fmt.Errorf("ebpf: %s: %w", BPFFS, err)
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, ""); err != nil {
		return fmt.Errorf("ebpf: mount bpffs at %s (mount -t bpf bpf %s): %w", BPFFS, BPFFS, err)
	}
	return nil
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Probe loads the programs once, with tiny private maps, to learn whether
// this kernel accepts them (doctor, and modes before a lab is built).
func Probe() error {
	probeOnce.Do(func() {
		spec, err := loadService()
		if err != nil {
			probeErr = err
			return
		}
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
			if m.Type != ebpf.Array && m.Type != ebpf.PerCPUArray {
				m.MaxEntries = 1
			}
		}
		var objs serviceObjects
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			probeErr = fmt.Errorf("this kernel does not load vnetlab's eBPF programs (they need Linux 6.2 or newer): %w", err)
			return
		}
		objs.Close()
	})
	return probeErr
}
