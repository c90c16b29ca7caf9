package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// FlowCleaner forgets the conntrack entries of UDP flows whose backend a
// frontend no longer has (tcbpf.Plane.ForgetUDPFlowsGuarded): what keep
// says when it starts, deleting only under g's lock what g still says left.
type FlowCleaner interface {
	ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend, g tcbpf.FlowGuard) (int, error)
}

// tcFlows is a tc plane's conntrack as a FlowCleaner.
type tcFlows struct{ *tcbpf.Plane }

func (t tcFlows) ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend, g tcbpf.FlowGuard) (int, error) {
	return t.ForgetUDPFlowsGuarded(keep, g)
}

// planes are what one node's proxy drives: the Service maps (one Plane for
// the sync, whichever programs read them), the tc programs on the pods'
// veths (ModeEBPF), the socket programs on the node's cgroup, and the
// NodePort programs on the node's uplink (both modes). Every program reads
// the same pinned maps, so one sync serves them all.
type planes struct {
	services svcsync.Plane
	flows    FlowCleaner // the NodePort programs' conntrack (and, with socket programs, their connected UDP sockets)
	dir      string
	tc       *tcbpf.Plane // nil in ModeSock: no program on any pod's veth
	sock     *sock.Plane  // nil when no cgroup is given (ModeEBPF)
	// uplink holds the NodePort programs (nodeport_in, nodeport_out) for
	// traffic from other nodes and outside: tc in ModeEBPF; in ModeSock
	// the socket plane's own maps (as Cilium keeps tc programs on the
	// host's device beside its socket LB: a socket elsewhere is not
	// this node's to translate).
	uplink *tcbpf.Plane
}

func (c Config) mode() string {
	if c.Mode == "" {
		return ModeEBPF
	}
	return c.Mode
}

// openPlanes opens the node's planes; the maps it creates are made for
// family fam (the node's addresses').
func openPlanes(c Config, fam family.Family, logf func(string, ...any)) (*planes, error) {
	switch c.mode() {
	case ModeEBPF:
		tc, err := tcbpf.OpenFamily(c.Plane, fam)
		if err != nil {
			return nil, err
		}
		p := &planes{services: tc, flows: tcFlows{tc}, dir: tc.Dir(), tc: tc, uplink: tc}
		if c.Cgroup != "" {
			// The node's own sockets; the pods' too with SocketLB, else the
			// pods' connections are the tc programs' (translated once, on
			// the wire).
			open := sock.OpenNetnsOnly
			if c.SocketLB {
				open = sock.OpenPodsViaTC
			}
			cookie, err := sock.NetnsCookie()
			if err == nil {
				p.sock, err = open(c.Plane, cookie)
			}
			if err == nil {
				err = attachSock(p.sock, c.Cgroup, logf)
			}
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("socket programs for the node's own processes: %w", err)
			}
			// The node's own connected UDP sockets (a pod's is tc's, with
			// --socket-lb too: bpf/sock.c's pods_via_tc).
			p.flows = staleUDP{tc: tc, sock: p.sock, logf: logf}
		}
		return p, nil
	case ModeSock:
		if c.Cgroup == "" {
			return nil, errors.New("--proxy vnetlab-sock needs --cgroup (the node's cgroup v2 directory, holding its pods)")
		}
		s, err := sock.OpenFamily(c.Plane, fam)
		if err != nil {
			return nil, err
		}
		p := &planes{services: s, flows: staleUDP{tc: s.Plane, sock: s, cgroup: c.Cgroup, logf: logf}, dir: s.Dir(), sock: s, uplink: s.Plane}
		if err := attachSock(s, c.Cgroup, logf); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("--mode %q: vnetlab kube-proxy drives %s or %s", c.Mode, ModeEBPF, ModeSock)
}

// attachSock puts the socket programs on the node's cgroup, or keeps those
// a previous proxy of this node left there (pinned links; they read the
// same maps, so its connections see no gap).
func attachSock(s *sock.Plane, cgroup string, logf func(string, ...any)) error {
	if s.Attached() {
		logf("socket programs on %s: kept from before (%s)", cgroup, filepath.Join(s.Dir(), sock.LinksDir))
		return nil
	}
	if _, err := os.Stat(cgroup); err != nil {
		return fmt.Errorf("the node's cgroup: %w", err)
	}
	a, err := s.AttachCgroup(cgroup)
	if err != nil {
		return err
	}
	logf("socket programs attached to cgroup %s (links pinned under %s)", a.Cgroup, a.Pins[0])
	return nil
}

func (p *planes) Close() error {
	var errs []error
	if p.sock != nil {
		errs = append(errs, p.sock.Close())
	}
	if p.tc != nil {
		errs = append(errs, p.tc.Close())
	}
	return errors.Join(errs...)
}

// staleUDP ends the UDP flows whose backend left their Service on every
// plane of the node: the NodePort programs' conntrack entries
// (ForgetUDPFlows; the pods' flows move without it),
// and the connected sockets the socket programs translated (EndStaleUDP),
// in the node's own namespace and, below cgroup (ModeSock), its pods'.
// A socket that cannot be ended (a kernel before 6.5) is logged, not
// retried: the tc flows are what the proxy must not lose.
type staleUDP struct {
	tc     *tcbpf.Plane
	sock   *sock.Plane
	cgroup string
	logf   func(string, ...any)
}

func (s staleUDP) ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend, g tcbpf.FlowGuard) (int, error) {
	n, err := s.tc.ForgetUDPFlowsGuarded(keep, g)
	namespaces := []string{""} // the proxy runs in the node's namespace
	if s.cgroup != "" {
		pods, cerr := cgroup.NetNamespaces(s.cgroup)
		if cerr != nil {
			s.logf("connected UDP sockets: the pods' namespaces: %v", cerr)
		}
		namespaces = append(namespaces, pods...)
	}
	// The sockets are ended under g's lock, each frontend keeping what it
	// has now: no socket connected to a backend a sync wrote since keep was
	// made is ended; a sync waits for the iteration (the node's UDP
	// sockets: milliseconds), never for the conntrack's walk.
	if g != nil {
		g.Lock()
		defer g.Unlock()
		now := map[netip.AddrPort][]tcbpf.Backend{}
		for fe := range keep {
			if bs, ok := g.Backends(fe); ok {
				now[fe] = slices.Clone(bs)
			}
		}
		keep = now
	}
	ended, serr := s.sock.EndStaleUDP(keep, namespaces)
	if serr != nil {
		s.logf("connected UDP sockets to a backend that left: %v", serr)
	}
	if ended > 0 {
		s.logf("ended %d connected UDP sockets whose backend left their Service", ended)
	}
	return n, err
}
