package tcbpf

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Proto is a Service's L4 protocol (its IP protocol number).
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// ParseProto reads "tcp" or "udp".
func ParseProto(s string) (Proto, error) {
	switch strings.ToLower(s) {
	case "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp or udp", s)
}

// MaxBackends is the most backends one Service may have for new flows,
// and the most Draining ones (counts are u16).
const MaxBackends = 65535

// Backend is one pod address behind a Service.
type Backend struct {
	IP   netip.Addr `json:"ip"`
	Port uint16     `json:"port"`
	// Draining: the backend takes no new flow but keeps its established
	// UDP flows (an endpoint terminating and still serving while others
	// are ready: kube-proxy's conntrack cleanup keeps the flows of every
	// serving endpoint). Its slot is after the backends for new flows
	// (bpf/lb.h's lb_svc.kept).
	Draining bool `json:"draining,omitempty"`
}

func (b Backend) String() string { return netip.AddrPortFrom(b.IP, b.Port).String() }

// CompareBackends orders backends by address, then port.
func CompareBackends(a, b Backend) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// Service is clusterIP:port/proto -> backends. ID is assigned by AddService.
type Service struct {
	VIP      netip.Addr `json:"vip"`
	Port     uint16     `json:"port"`
	Proto    Proto      `json:"proto"`
	Backends []Backend  `json:"backends"`
	ID       uint32     `json:"id"`
	// Affinity is Kubernetes' sessionAffinity ClientIP: a client's new
	// flows keep the backend of its last one for this many seconds after
	// it (0: none, every flow is placed by its hash).
	Affinity uint32 `json:"affinity_seconds,omitempty"`
	// AffinityID is the key under which sessionAffinity remembers a
	// client's backend, the same for every frontend of a Service port
	// (clusterIP, node ports, external IPs: kube-proxy keeps one memory
	// per Service port); 0: the entry's own ID. Chosen by the caller
	// (svcsync), above FirstAffinityID.
	AffinityID uint32 `json:"affinity_id,omitempty"`
	// External marks the entry that serves only clients outside the node
	// (the uplink's nodeport_in), beside the frontend's entry for every
	// client: a NodePort or external IP of a Service whose
	// externalTrafficPolicy is Local holds this node's endpoints there and
	// every endpoint in the other (pods and the node itself reach them all,
	// as with kube-proxy). bpf/lb.h's LB_SCOPE_EXTERNAL.
	External bool `json:"external,omitempty"`
	// HasExternal (an entry for every client) tells nodeport_in to serve
	// outside clients from the frontend's External entry, which must exist
	// while it is set (LB_SVC_EXTERNAL).
	HasExternal bool `json:"has_external,omitempty"`
}

// MaxAffinity is the longest affinity timeout (Kubernetes' limit, a day).
const MaxAffinity = 86400

// FirstAffinityID is the lowest Service.AffinityID: entry IDs (from
// lb_meta) stay below it, so a memory shared by a Service port's
// frontends is never one entry's own.
const FirstAffinityID = 1 << 31

// Mirrors of bpf/lb.h's LB_SVC_* flags and LB_SCOPE_* values.
const (
	svcAffinity = 0x1
	svcExternal = 0x2

	scopeAll      = 0
	scopeExternal = 1
)

// value is the Service map's value for s with id.
func (s Service) value(id uint32) serviceLbSvc {
	fresh := s.forNewFlows()
	v := serviceLbSvc{Id: id, Count: uint16(len(fresh)), Kept: uint16(len(s.Backends) - len(fresh)), AffinityTimeout: s.Affinity}
	if s.Affinity > 0 {
		v.Flags |= svcAffinity
		v.AffinityId = s.AffinityID
	}
	if s.HasExternal {
		v.Flags |= svcExternal
	}
	return v
}

// forNewFlows are s's backends that take new flows (not Draining).
func (s Service) forNewFlows() []Backend {
	return slices.DeleteFunc(slices.Clone(s.Backends), func(b Backend) bool { return b.Draining })
}

// slotted is s's backends in the order of their slots: those for new
// flows (slots 0..count-1), then the Draining ones.
func (s Service) slotted() []Backend {
	return slices.Concat(s.forNewFlows(), slices.DeleteFunc(slices.Clone(s.Backends), func(b Backend) bool { return !b.Draining }))
}

// frontendKey names one Service map entry, whatever the family.
type frontendKey struct {
	vip      netip.Addr
	port     uint16
	proto    Proto
	external bool
}

func (s Service) frontend() frontendKey { return frontendKey{s.VIP, s.Port, s.Proto, s.External} }

func (s Service) String() string {
	if s.External {
		return fmt.Sprintf("%s/%s (external)", netip.AddrPortFrom(s.VIP, s.Port), s.Proto)
	}
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(s.VIP, s.Port), s.Proto)
}

// ErrExists and ErrNotFound are returned (wrapped) by AddService and
// DelService; ErrIPv4Only by AddService for an IPv6 Service on a plane
// made for IPv4 only.
var (
	ErrExists   = errors.New("service already exists")
	ErrNotFound = errors.New("no such service")
	ErrIPv4Only = errors.New("this eBPF plane was made for IPv4 only (its IPv6 maps hold one entry): recreate the lab or cluster as dual-stack")
)

// Validate checks what the data plane needs: IPv4 or IPv6 addresses, one
// family per Service, ports 1-65535, tcp or udp, no duplicate backends.
func (s Service) Validate() error {
	v6 := s.VIP.Is6()
	if !s.VIP.IsValid() || s.VIP.Is4In6() || s.VIP.Zone() != "" {
		return fmt.Errorf("service %s: the clusterIP must be an IPv4 or IPv6 address", s)
	}
	if s.Port == 0 {
		return fmt.Errorf("service %s: port 0: use 1-65535", s)
	}
	if s.Proto != TCP && s.Proto != UDP {
		return fmt.Errorf("service %s: protocol must be tcp or udp", s)
	}
	if s.Affinity > MaxAffinity {
		return fmt.Errorf("service %s: affinity timeout %ds: at most %d (a day)", s, s.Affinity, MaxAffinity)
	}
	if s.AffinityID != 0 && s.AffinityID < FirstAffinityID {
		return fmt.Errorf("service %s: affinity id %d: at least %d (below are entries' own ids)", s, s.AffinityID, uint32(FirstAffinityID))
	}
	if s.External && s.HasExternal {
		return fmt.Errorf("service %s: an external entry cannot point to another", s)
	}
	if n := len(s.forNewFlows()); n > MaxBackends || len(s.Backends)-n > MaxBackends {
		return fmt.Errorf("service %s: %d backends, at most %d for new flows and %d draining", s, len(s.Backends), MaxBackends, MaxBackends)
	}
	seen := map[netip.AddrPort]bool{}
	for _, b := range s.Backends {
		if !b.IP.IsValid() || b.IP.Is6() != v6 || b.IP.Is4In6() || b.IP.Zone() != "" {
			return fmt.Errorf("service %s: backend %s: must be an %s address, as the clusterIP", s, b, familyName(v6))
		}
		if b.Port == 0 {
			return fmt.Errorf("service %s: backend %s: port 0: use 1-65535", s, b)
		}
		ap := netip.AddrPortFrom(b.IP, b.Port)
		if seen[ap] {
			return fmt.Errorf("service %s: backend %s is listed twice", s, b)
		}
		seen[ap] = true
	}
	return nil
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}
