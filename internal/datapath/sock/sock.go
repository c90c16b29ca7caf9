// Package sock is vnetlab's socket-level Service translation (provider
// ebpf-sock; bpf/sock.c): cgroup connect, sendmsg, recvmsg and getpeername
// programs, for IPv4 and IPv6, on a lab's own cgroup translate a clusterIP
// when a socket connects or sends, so no packet is ever translated on the
// wire. An IPv6 socket's v4-mapped address reaches an IPv4 clusterIP.
// It works in every mode, macvlan included, for the processes started in
// the lab's cgroup (proc.Cmd.InCgroup(plane.Cgroup())).
//
// Services are the tc data plane's (internal/datapath/tcbpf): the same
// pinned maps, so Plane embeds an tcbpf.Plane for AddService and friends.
package sock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Plane is a lab's socket-level Service translation, opened by one process.
type Plane struct {
	// The lab's Services (and the tc programs, which this package does not
	// attach): AddService, DelService, ListServices, ...
	*tcbpf.Plane

	lab     string
	objs    objects
	spec    *ebpf.CollectionSpec // for the socket iterator, loaded when first needed
	created []string

	iterMu sync.Mutex // held while the iterator's keep maps are filled, walked and emptied
	iter   *udpIter   // the UDP socket iterator, once loaded (iterMu)
}

// objects: the eight hook programs and this package's own maps; the
// Service maps come in as the programs' dependencies, from the lab's pins.
// The UDP socket iterator (stale.go) needs a newer kernel than the hooks
// (bpf_sock_destroy, 6.5) and is loaded apart, when first used.
type objects struct {
	SockConnect4     *ebpf.Program `ebpf:"sock_connect4"`
	SockGetpeername4 *ebpf.Program `ebpf:"sock_getpeername4"`
	SockRecvmsg4     *ebpf.Program `ebpf:"sock_recvmsg4"`
	SockSendmsg4     *ebpf.Program `ebpf:"sock_sendmsg4"`
	SockConnect6     *ebpf.Program `ebpf:"sock_connect6"`
	SockGetpeername6 *ebpf.Program `ebpf:"sock_getpeername6"`
	SockRecvmsg6     *ebpf.Program `ebpf:"sock_recvmsg6"`
	SockSendmsg6     *ebpf.Program `ebpf:"sock_sendmsg6"`

	SockConns  *ebpf.Map `ebpf:"sock_conns"`  // connected sockets' peers, by cookie
	Sock6Conns *ebpf.Map `ebpf:"sock6_conns"` // the same for IPv6 sockets
	SockDests  *ebpf.Map `ebpf:"sock_dests"`  // unconnected UDP sockets' (socket storage)
	SockRev    *ebpf.Map `ebpf:"sock_rev"`    // what sock_dests has no room for
	SockStats  *ebpf.Map `ebpf:"sock_stats"`
}

func (o *objects) Close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.SockConnect4, o.SockGetpeername4, o.SockRecvmsg4, o.SockSendmsg4, o.SockConnect6, o.SockGetpeername6, o.SockRecvmsg6, o.SockSendmsg6, o.SockConns, o.Sock6Conns, o.SockDests, o.SockRev, o.SockStats} {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// hooks: pin name, program, attach type.
func (p *Plane) hooks() []struct {
	name string
	prog *ebpf.Program
	at   ebpf.AttachType
} {
	return []struct {
		name string
		prog *ebpf.Program
		at   ebpf.AttachType
	}{
		{"connect4", p.objs.SockConnect4, ebpf.AttachCGroupInet4Connect},
		{"sendmsg4", p.objs.SockSendmsg4, ebpf.AttachCGroupUDP4Sendmsg},
		{"recvmsg4", p.objs.SockRecvmsg4, ebpf.AttachCGroupUDP4Recvmsg},
		{"getpeername4", p.objs.SockGetpeername4, ebpf.AttachCgroupInet4GetPeername},
		{"connect6", p.objs.SockConnect6, ebpf.AttachCGroupInet6Connect},
		{"sendmsg6", p.objs.SockSendmsg6, ebpf.AttachCGroupUDP6Sendmsg},
		{"recvmsg6", p.objs.SockRecvmsg6, ebpf.AttachCGroupUDP6Recvmsg},
		{"getpeername6", p.objs.SockGetpeername6, ebpf.AttachCgroupInet6GetPeername},
	}
}

// Open loads the programs and the lab's maps (pinned under
// /sys/fs/bpf/vnetlab/<lab>/, created on first use, shared with the tc
// data plane). Nothing is attached until Attach. Maps it creates are made
// for both families (OpenFamily).
func Open(lab string) (*Plane, error) { return OpenFamily(lab, family.Dual) }

// OpenFamily is Open for a lab or node of family fam: the maps this call
// creates are sized for it (tcbpf.SizeMaps; on an IPv4-only plane the IPv6
// maps hold one entry).
func OpenFamily(lab string, fam family.Family) (*Plane, error) { return open(lab, fam, 0, false) }

// OpenNetnsOnly is Open with programs that translate only the sockets of
// one network namespace (its cookie, NetnsCookie): a Kubernetes node's own
// processes and hostNetwork pods, when the node's pods (each in a
// namespace of its own) are left to the tc programs.
func OpenNetnsOnly(lab string, netnsCookie uint64) (*Plane, error) {
	if netnsCookie == 0 {
		return nil, errors.New("sock: a network namespace cookie is never 0")
	}
	return open(lab, family.Dual, netnsCookie, false)
}

// OpenPodsViaTC is OpenNetnsOnly whose programs also translate the sockets
// of every other namespace below the cgroup they are attached to: the
// pods of a Kubernetes node whose veths carry the tc programs (socket LB,
// `vnetlab kube-proxy --socket-lb`). A Service without endpoints or with
// sessionAffinity is left to the tc programs there (bpf/sock.c's
// pods_via_tc): they refuse and pin clients as Kubernetes defines it.
func OpenPodsViaTC(lab string, netnsCookie uint64) (*Plane, error) {
	if netnsCookie == 0 {
		return nil, errors.New("sock: a network namespace cookie is never 0")
	}
	return open(lab, family.Dual, netnsCookie, true)
}

// open opens the tc plane for family fam (a plane already made keeps its
// family), then the socket programs: their own IPv6 maps sized as the tc
// plane's.
func open(lab string, fam family.Family, netnsCookie uint64, podsViaTC bool) (*Plane, error) {
	svc, err := tcbpf.OpenFamily(lab, fam)
	if err != nil {
		return nil, err
	}
	p := &Plane{Plane: svc, lab: lab, created: svc.Created()}
	spec, err := loadSock()
	if err != nil {
		svc.Close()
		return nil, err
	}
	// lb6.h's tail-call array and the stub standing for its tc program
	// (bpf/sock.c): never loaded from here, so the lab's pinned array
	// keeps the tc plane's program.
	delete(spec.Maps, sockMapLb6Tail)
	delete(spec.Programs, sockProgLb6Reject)
	for _, name := range []string{sockMapSockConns, sockMapSockDests, sockMapSockRev, sockMapSockStats, sockMapSockAffinity, sockMapSock6Conns, sockMapSock6Dests, sockMapSock6Rev, sockMapSock6Affinity} {
		if _, err := os.Stat(filepath.Join(svc.Dir(), name)); errors.Is(err, os.ErrNotExist) {
			p.created = append(p.created, filepath.Join(svc.Dir(), name))
		}
	}
	var viaTC uint32
	if podsViaTC {
		viaTC = 1
	}
	err = spec.Variables["only_netns"].Set(netnsCookie)
	if err == nil {
		err = spec.Variables["pods_via_tc"].Set(viaTC)
	}
	if err != nil {
		svc.Close()
		return nil, fmt.Errorf("sock: %w", err)
	}
	err = tcbpf.SizeMaps(spec, svc.Dir(), svc.HasIPv6(), sockMapSock6Conns, sockMapSock6Rev, sockMapSock6Affinity)
	if err == nil {
		err = spec.LoadAndAssign(&p.objs, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: svc.Dir()}})
	}
	if err != nil {
		svc.Close()
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("sock: the kernel's verifier rejected vnetlab's socket programs: %+v", ve)
		}
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("sock: lab %s's pinned maps were made by another vnetlab build (%v): recreate the lab", lab, err)
		}
		return nil, fmt.Errorf("sock: load socket programs: %w", err)
	}
	p.spec = spec
	return p, nil
}

// Created lists the bpffs paths Open created (for the lab's journal).
func (p *Plane) Created() []string { return append([]string(nil), p.created...) }

// Close releases this process's handles; attachments (pinned) stay.
func (p *Plane) Close() error {
	p.iterMu.Lock()
	defer p.iterMu.Unlock()
	var errs []error
	if p.iter != nil {
		errs = append(errs, p.iter.Close())
		p.iter = nil
	}
	return errors.Join(append(errs, p.objs.Close(), p.Plane.Close())...)
}

// LinksDir holds, under a plane's pin directory, the socket programs'
// cgroup links.
const LinksDir = "sock"

func (p *Plane) linkDir() string { return filepath.Join(p.Dir(), LinksDir) }

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
// change every process on the machine) and attaches the eight programs to
// it with pinned bpf_links, so they outlive this process.
func (p *Plane) Attach() (Attachment, error) {
	if p.Attached() {
		return Attachment{}, fmt.Errorf("socket-level Services are already attached to lab %s's cgroup", p.lab)
	}
	cg, created, err := cgroup.Create(p.lab)
	if err != nil {
		return Attachment{}, err
	}
	a, err := p.attach(cg)
	if err != nil {
		if created {
			_ = cgroup.Remove(cg)
		}
		return Attachment{}, err
	}
	a.CgroupCreated = created
	return a, nil
}

// AttachCgroup attaches the eight programs to a cgroup v2 directory that
// exists and is not the root (e.g. a Kubernetes node's, which holds its
// pods): they act for every process in it and its descendants. The pinned
// links (under the plane's directory, Attachment.Pins) outlive this
// process; Detach, or removing the plane's directory, takes them off.
func (p *Plane) AttachCgroup(dir string) (Attachment, error) {
	if p.Attached() {
		return Attachment{}, fmt.Errorf("socket-level Services of %s are already attached (pins under %s)", p.lab, p.linkDir())
	}
	root, err := cgroup.Root()
	if err != nil {
		return Attachment{}, err
	}
	if rel, err := filepath.Rel(root, filepath.Clean(dir)); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return Attachment{}, fmt.Errorf("sock: %s is not a cgroup below the cgroup v2 root %s: vnetlab never attaches to the root (every process of the machine) or outside it", dir, root)
	}
	if st, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil || st.IsDir() {
		return Attachment{}, fmt.Errorf("sock: %s is not a cgroup v2 directory (no cgroup.procs)", dir)
	}
	return p.attach(dir)
}

func (p *Plane) attach(cg string) (Attachment, error) {
	a := Attachment{Cgroup: cg}
	fail := func(err error) (Attachment, error) {
		_ = p.Detach()
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

// NetnsCookie is the cookie of the calling thread's network namespace (the
// value bpf_get_netns_cookie gives its sockets).
func NetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var v uint64
	l := uint32(unsafe.Sizeof(v))
	// SO_NETNS_COOKIE (Linux 5.14) is not in x/sys/unix yet.
	const soNetnsCookie = 71
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, soNetnsCookie, uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0); e != 0 {
		return 0, fmt.Errorf("getsockopt SO_NETNS_COOKIE: %w", e)
	}
	return v, nil
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
	NoBackend uint64 `json:"no_backend_refusals"`  // ECONNREFUSED: Service without backends
}

// SockStats reads the counters.
func (p *Plane) SockStats() (Stats, error) { return statsOf(p.objs.SockStats) }

func statsOf(m *ebpf.Map) (Stats, error) {
	v, err := tcbpf.SumCounters(m, "sock stats", 4)
	if err != nil {
		return Stats{}, err
	}
	return Stats{Connects: v[0], Sends: v[1], Reverse: v[2], NoBackend: v[3]}, nil
}

// ReadStats reads lab's socket programs' counters from their pinned map,
// read-only (it loads nothing); nil when the lab has no socket programs.
func ReadStats(lab string) (*Stats, error) {
	if !tcbpf.HasPin(lab, sockMapSockStats) {
		return nil, nil
	}
	var st Stats
	err := tcbpf.ReadPinned(lab, sockMapSockStats, func(m *ebpf.Map) (err error) { st, err = statsOf(m); return })
	return &st, err
}
