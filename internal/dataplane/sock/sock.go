// Package sock is vnetlab's socket-level Service translation (provider
// ebpf-sock; bpf/sock.c): cgroup connect4, sendmsg4, recvmsg4 and
// getpeername4 programs on a lab's own cgroup translate a clusterIP when a
// socket connects or sends, so no packet is ever translated on the wire.
// It works in every mode, macvlan included, for the processes started in
// the lab's cgroup (proc.Cmd.InCgroup(plane.Cgroup())).
//
// Services are the tc data plane's (internal/dataplane/ebpf): the same
// pinned maps, so Plane embeds an ebpf.Plane for AddService and friends.
package sock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cebpf "github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/cgroup"
	"github.com/vnetlab/vnetlab/internal/dataplane/ebpf"
)

// Plane is a lab's socket-level Service translation, opened by one process.
type Plane struct {
	// The lab's Services (and the tc programs, which this package does not
	// attach): AddService, DelService, ListServices, ...
	*ebpf.Plane

	lab     string
	objs    objects
	created []string
}

// objects: the four programs and this package's own maps; the Service
// maps come in as the programs' dependencies, from the lab's pins.
type objects struct {
	sockPrograms
	SockRev   *cebpf.Map `ebpf:"sock_rev"`
	SockStats *cebpf.Map `ebpf:"sock_stats"`
}

func (o *objects) Close() error {
	return errors.Join(o.sockPrograms.Close(), o.SockRev.Close(), o.SockStats.Close())
}

// hooks: pin name, program, attach type.
func (p *Plane) hooks() []struct {
	name string
	prog *cebpf.Program
	at   cebpf.AttachType
} {
	return []struct {
		name string
		prog *cebpf.Program
		at   cebpf.AttachType
	}{
		{"connect4", p.objs.SockConnect4, cebpf.AttachCGroupInet4Connect},
		{"sendmsg4", p.objs.SockSendmsg4, cebpf.AttachCGroupUDP4Sendmsg},
		{"recvmsg4", p.objs.SockRecvmsg4, cebpf.AttachCGroupUDP4Recvmsg},
		{"getpeername4", p.objs.SockGetpeername4, cebpf.AttachCgroupInet4GetPeername},
	}
}

// Open loads the programs and the lab's maps (pinned under
// /sys/fs/bpf/vnetlab/<lab>/, created on first use, shared with the tc
// data plane). Nothing is attached until Attach.
func Open(lab string) (*Plane, error) {
	svc, err := ebpf.Open(lab)
	if err != nil {
		return nil, err
	}
	p := &Plane{Plane: svc, lab: lab, created: svc.Created()}
	spec, err := loadSock()
	if err != nil {
		svc.Close()
		return nil, err
	}
	for _, name := range []string{"sock_rev", "sock_stats"} {
		if _, err := os.Stat(filepath.Join(svc.Dir(), name)); errors.Is(err, os.ErrNotExist) {
			p.created = append(p.created, filepath.Join(svc.Dir(), name))
		}
	}
	err = spec.LoadAndAssign(&p.objs, &cebpf.CollectionOptions{Maps: cebpf.MapOptions{PinPath: svc.Dir()}})
	if err != nil {
		svc.Close()
		var ve *cebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("sock: the kernel's verifier rejected vnetlab's socket programs: %+v", ve)
		}
		if errors.Is(err, cebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("sock: lab %s's pinned maps were made by another vnetlab build (%v): recreate the lab", lab, err)
		}
		return nil, fmt.Errorf("sock: load socket programs: %w", err)
	}
	return p, nil
}

// Created lists the bpffs paths Open created (for the lab's journal).
func (p *Plane) Created() []string { return append([]string(nil), p.created...) }

// Close releases this process's handles; attachments (pinned) stay.
func (p *Plane) Close() error { return errors.Join(p.objs.Close(), p.Plane.Close()) }

func (p *Plane) linkDir() string { return filepath.Join(p.Dir(), "sock") }

// Attachment says where the programs went.
type Attachment struct {
	// Cgroup is the lab's cgroup v2 directory: start clients there.
	Cgroup string `json:"cgroup"`
	// CgroupCreated: Attach made it (journal it: down removes it).
	CgroupCreated bool `json:"cgroup_created"`
	// Pins: the links' directory, then one pinned link per hook.
	Pins []string `json:"pins"`
}

// Cgroup is the lab's cgroup directory (it exists once Attach ran).
func (p *Plane) Cgroup() (string, error) { return cgroup.LabPath(p.lab) }

// Attach creates the lab's cgroup (never the root cgroup: that would
// change every process on the machine) and attaches the four programs to
// it with pinned bpf_links, so they outlive this process.
func (p *Plane) Attach() (Attachment, error) {
	if p.Attached() {
		return Attachment{}, fmt.Errorf("socket-level Services are already attached to lab %s's cgroup", p.lab)
	}
	cg, created, err := cgroup.Create(p.lab)
	if err != nil {
		return Attachment{}, err
	}
	a := Attachment{Cgroup: cg, CgroupCreated: created}
	fail := func(err error) (Attachment, error) {
		_ = p.Detach()
		if created {
			_ = cgroup.Remove(cg)
		}
		return Attachment{}, err
	}
	if err := os.MkdirAll(p.linkDir(), 0o700); err != nil {
		return fail(err)
	}
	a.Pins = append(a.Pins, p.linkDir())
	for _, h := range p.hooks() {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: h.at, Program: h.prog})
		if err != nil {
			return fail(fmt.Errorf("attach %s to cgroup %s: %w", h.name, cg, err))
		}
		pin := filepath.Join(p.linkDir(), h.name)
		err = l.Pin(pin)
		l.Close()
		if err != nil {
			return fail(fmt.Errorf("pin %s: %w", pin, err))
		}
		a.Pins = append(a.Pins, pin)
	}
	return a, nil
}

// Attached reports whether the programs are on the lab's cgroup.
func (p *Plane) Attached() bool {
	_, err := os.Stat(filepath.Join(p.linkDir(), "connect4"))
	return err == nil
}

// Detach removes the programs from the lab's cgroup (explicitly: dropping
// a pin detaches only once bpffs frees it). The cgroup stays until the
// lab goes, as its processes may still run.
func (p *Plane) Detach() error {
	var errs []error
	for _, h := range p.hooks() {
		pin := filepath.Join(p.linkDir(), h.name)
		l, err := link.LoadPinnedLink(pin, nil)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := l.Detach(); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w", h.name, err))
		}
		l.Close()
	}
	if err := os.RemoveAll(p.linkDir()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stats are the socket programs' counters, summed over CPUs.
type Stats struct {
	Connects  uint64 `json:"connects_translated"`  // connect() to a clusterIP
	Sends     uint64 `json:"datagrams_translated"` // unconnected UDP sendto()
	Reverse   uint64 `json:"addresses_restored"`   // recvfrom()/getpeername() answers
	NoBackend uint64 `json:"no_backend_refusals"`  // EPERM: Service without backends
}

// SockStats reads the counters.
func (p *Plane) SockStats() (Stats, error) {
	var v [4]uint64
	for i := range v {
		var per []uint64
		if err := p.objs.SockStats.Lookup(uint32(i), &per); err != nil {
			return Stats{}, fmt.Errorf("sock stats: %w", err)
		}
		for _, x := range per {
			v[i] += x
		}
	}
	return Stats{Connects: v[0], Sends: v[1], Reverse: v[2], NoBackend: v[3]}, nil
}
