package labservice

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Config is a lab's services.json: which provider realises its services,
// the services themselves, how many generated ones come with them, and (for
// ebpf) the endpoints its programs are attached to.
type Config struct {
	Provider string `json:"provider"`
	// Installed is true once the provider's objects (chains, programs) are in the lab.
	Installed bool      `json:"installed"`
	Services  []Service `json:"services"`
	// Extra generated services (Generated(f, 0..Extra-1)) per family f the
	// lab measures, kept as a count so that 100k services do not fill the
	// file or `svc ls`.
	Extra int `json:"extra_services,omitempty"`
	// Family is the lab's (empty in files from before IPv6: ipv4).
	Family    family.Family `json:"ip_family,omitempty"`
	Endpoints []Endpoint    `json:"endpoints,omitempty"`
	// LoadSeconds is how long the provider took to load the last change.
	LoadSeconds float64 `json:"last_load_s,omitempty"`
}

// Endpoint is where the ebpf provider attaches its programs: a pod's
// interface, seen from inside the pod ("pod") or at the node end of its veth
// ("node"), as seed 002's `mustang ep add --ifname eth0 --netns PATH`.
type Endpoint struct {
	Pod       string `json:"pod,omitempty"`
	NS        string `json:"netns"`
	Ifname    string `json:"ifname"`
	Placement string `json:"placement"`
}

// Placements of eBPF programs.
const (
	PlacementPod  = "pod"  // tc on the pod's own interface (macvlan/ipvlan: seed 002 ipvlan+eBPF)
	PlacementNode = "node" // tc on the node end of the pod's veth (seed 002 veth+eBPF)
	// PlacementRouted: the node end of the pod's veth with host routing
	// (mode veth-ebpf: translation, then bpf_redirect_peer; docs/ebpf.md).
	PlacementRouted = "routed"
)

// FileName is the services file inside a lab's state directory.
const FileName = "services.json"

// Load reads a lab's services (an empty config when it has none yet).
func Load(labName string) (*Config, error) { return lab.ReadNew[Config](labName, FileName) }

// Save writes a lab's services atomically.
func (c *Config) Save(labName string) error { return lab.WriteFile(labName, FileName, c) }

// Clone returns a deep copy (the "old" side of an update).
func (c *Config) Clone() *Config {
	n := *c
	n.Services = make([]Service, len(c.Services))
	for i, s := range c.Services {
		s.Backends = append([]Backend(nil), s.Backends...)
		n.Services[i] = s
	}
	n.Endpoints = append([]Endpoint(nil), c.Endpoints...)
	return &n
}

// All returns the configured services followed by the generated ones.
func (c *Config) All() []Service {
	out := make([]Service, 0, c.Count())
	for _, f := range c.Family.Measured() {
		for i := 0; i < c.Extra; i++ {
			out = append(out, Generated(f, i))
		}
	}
	return append(out, c.Services...)
}

// Count is the number of services the provider loads.
func (c *Config) Count() int { return len(c.Services) + c.Extra*len(c.Family.Measured()) }

// Find returns the index of a configured service, or -1.
func (c *Config) Find(k Key) int {
	for i, s := range c.Services {
		if s.Key() == k {
			return i
		}
	}
	return -1
}

// Add appends a service; a second service with the same clusterIP, port and
// protocol is refused.
func (c *Config) Add(s Service) error {
	if c.Find(s.Key()) >= 0 {
		return fmt.Errorf("service %s already exists: delete it first (`vnetlab svc del LAB --service %s`)", s, s)
	}
	c.Services = append(c.Services, s)
	return nil
}

// AddBackends adds backends bs to the service k, and returns those it did
// not have; a service that has them all is refused.
func (c *Config) AddBackends(k Key, bs []Backend) ([]Backend, error) {
	i := c.Find(k)
	if i < 0 {
		return nil, fmt.Errorf("no service %s", k)
	}
	s := &c.Services[i]
	var added []Backend
	for _, b := range bs {
		if !slices.ContainsFunc(s.Backends, func(o Backend) bool { return o.IP == b.IP && o.Port == b.Port }) {
			added = append(added, b)
		}
	}
	if len(added) == 0 {
		return nil, fmt.Errorf("service %s already exists with these backends (%s): add another backend, or delete it first (`vnetlab svc del LAB --service %s`)", k, BackendList(s.Backends), k)
	}
	s.Backends = append(s.Backends, added...)
	return added, nil
}

// CountText says how many services c has: "6 services + 1000 generated".
func (c *Config) CountText() string {
	s := fmt.Sprintf("%d services", len(c.Services))
	if c.Extra > 0 {
		s += fmt.Sprintf(" + %d generated", c.Extra)
		if fs := c.Family.Measured(); len(fs) > 1 {
			s += fmt.Sprintf(" per family (%d in all)", c.Extra*len(fs))
		}
	}
	return s
}

// Del removes a service.
func (c *Config) Del(k Key) error {
	i := c.Find(k)
	if i < 0 {
		var have []string
		for _, s := range c.Services {
			if s.VIP == k.VIP && s.Port == k.Port {
				have = append(have, s.String())
			}
		}
		hint := "see `vnetlab svc ls LAB`"
		if len(have) > 0 {
			hint = "this port has " + strings.Join(have, ", ")
		}
		return fmt.Errorf("no service %s (%s)", k, hint)
	}
	c.Services = append(c.Services[:i], c.Services[i+1:]...)
	return nil
}

// Resolve turns backend specs (addresses or pod names) into backends of
// service k (their port is k's when a spec has none). Backends must be pods
// of the lab: vnetlab sends traffic only into namespaces it created. A
// Service has one family, its clusterIP's: a pod named stands for its
// address of that family (a dual-stack Service is two, one per clusterIP).
func Resolve(st *lab.State, specs []BackendSpec, k Key) ([]Backend, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("a service needs at least one backend (--backend 192.168.10.10:5201 or --backend pod-a)")
	}
	fam := family.Of(k.VIP)
	var out []Backend
	seen := map[netip.AddrPort]bool{}
	for _, b := range specs {
		if ip, err := netip.ParseAddr(b.Host); err == nil && family.Of(ip) != fam {
			return nil, fmt.Errorf("backend %s is %s but clusterIP %s is %s: give the pod's %s address or its name", b.Host, family.Of(ip), k.VIP, fam, fam)
		}
		var pod *lab.PodState
		for i := range st.Pods {
			if p := &st.Pods[i]; p.Name == b.Host || sameAddr(p.IP, b.Host) || sameAddr(p.IP6, b.Host) {
				pod = p
			}
		}
		if pod == nil {
			return nil, fmt.Errorf("backend %s is not a pod of lab %s (pods: %s): vnetlab only sends traffic to its own pods", b.Host, st.Name, podList(st))
		}
		addr := pod.IP
		if fam == family.IPv6 {
			addr = pod.IP6
		}
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("backend %s: pod %s has no %s address for clusterIP %s (lab %s is %s)", b.Host, pod.Name, fam, k.VIP, st.Name, st.Spec.Family.Or())
		}
		port := b.Port
		if port == 0 {
			port = k.Port
		}
		be := Backend{IP: ip, Port: port, Pod: pod.Name}
		ap := netip.AddrPortFrom(be.IP, be.Port)
		if seen[ap] {
			return nil, fmt.Errorf("backend %s is given twice", ap)
		}
		seen[ap] = true
		out = append(out, be)
	}
	return out, nil
}

// sameAddr: text a is the address b (IPv6 has several spellings).
func sameAddr(a, b string) bool {
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	return err1 == nil && err2 == nil && x == y
}

// keepsEmpty says whether provider p keeps a Service without backends
// (Info.KeepsEmptyServices; the default provider's answer when unset).
func keepsEmpty(p string) bool {
	if p == "" {
		p = DefaultProvider
	}
	i, err := Describe(p)
	return err == nil && i.KeepsEmptyServices
}

func podList(st *lab.State) string {
	var p []string
	for _, pod := range st.Pods {
		addrs := pod.IP
		if pod.IP6 != "" {
			addrs = strings.TrimPrefix(addrs+" "+pod.IP6, " ")
		}
		p = append(p, pod.Name+"="+addrs)
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ", ")
}

// CheckVIP refuses clusterIPs of a family the lab lacks, and those that
// would shadow the lab's own addresses or the generated range.
func CheckVIP(st *lab.State, vip netip.Addr) error {
	if fam, lf := family.Of(vip), st.Spec.Family.Or(); !slices.Contains(lf.Measured(), fam) {
		return fmt.Errorf("clusterIP %s is %s but lab %s is %s: use an %s clusterIP, or a lab with --ip-family %s or dual", vip, fam, st.Name, lf, lf.Measured()[0], fam)
	}
	for _, cidr := range []string{st.Spec.PodCIDR, st.Spec.PodCIDR6} {
		if pfx, err := netip.ParsePrefix(cidr); err == nil && pfx.Contains(vip) {
			return fmt.Errorf("clusterIP %s is inside the pod network %s: use an address outside it (Kubernetes' default service range is 10.96.0.0/12; %s for IPv6)", vip, pfx, DefaultVIP6)
		}
	}
	if inGeneratedRanges(vip) {
		vips, backends := GeneratedRanges(family.Of(vip))
		return fmt.Errorf("clusterIP %s is in %s/%s, reserved for --extra-services: use another address", vip, vips, backends)
	}
	for _, n := range st.Nodes {
		if sameAddr(n.IP, vip.String()) || sameAddr(n.IP6, vip.String()) {
			return fmt.Errorf("clusterIP %s is node %s's address: use another address", vip, n.Name)
		}
	}
	if sameAddr(st.Gateway, vip.String()) || sameAddr(st.Gateway6, vip.String()) {
		return fmt.Errorf("clusterIP %s is the pods' gateway: use another address", vip)
	}
	return nil
}

// Validate checks a whole config against a lab (for scenario files and
// configs written by hand): addresses, duplicates, backends.
func (c *Config) Validate(st *lab.State) error {
	if err := CheckExtra(c.Extra); err != nil {
		return fmt.Errorf("extra services %v", err)
	}
	if c.Extra > 0 && c.Family.Or() != st.Spec.Family.Or() {
		return fmt.Errorf("extra services are generated for ip_family %s but lab %s is %s: set ip_family %s", c.Family.Or(), st.Name, st.Spec.Family.Or(), st.Spec.Family.Or())
	}
	seen := map[Key]bool{}
	for _, s := range c.Services {
		if s.Proto != TCP && s.Proto != UDP {
			return fmt.Errorf("service %s: unknown protocol %q: use tcp or udp", s, s.Proto)
		}
		if !s.VIP.IsValid() || s.Port == 0 {
			return fmt.Errorf("service %s: clusterIP must be an address and port 1-65535", s)
		}
		if err := CheckVIP(st, s.VIP); err != nil {
			return fmt.Errorf("service %s: %v", s, err)
		}
		if seen[s.Key()] {
			return fmt.Errorf("service %s is defined twice", s)
		}
		seen[s.Key()] = true
		if len(s.Backends) == 0 && !keepsEmpty(c.Provider) {
			return fmt.Errorf("service %s has no backends", s)
		}
		for _, b := range s.Backends {
			if _, err := Resolve(st, []BackendSpec{{Host: b.IP.String(), Port: b.Port}}, s.Key()); err != nil {
				return fmt.Errorf("service %s: %v", s, err)
			}
		}
	}
	if c.Provider != "" {
		if _, err := Get(c.Provider); err != nil {
			return err
		}
	}
	return nil
}

// Sorted returns the configured services ordered by clusterIP, port, protocol.
func (c *Config) Sorted() []Service {
	out := append([]Service(nil), c.Services...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.VIP != b.VIP {
			return a.VIP.Less(b.VIP)
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Proto < b.Proto
	})
	return out
}

// EngineServices are the service path's services in a lab of family f:
// DefaultVIP (IPv4) and DefaultVIP6 (IPv6) as f has them, on every engine
// port, TCP and UDP, each leading to the server pod on the same port.
func EngineServices(server lab.PodState, f family.Family) []Service {
	var out []Service
	for _, fam := range f.Measured() {
		vip, ip := DefaultVIP, server.IP
		if fam == family.IPv6 {
			vip, ip = DefaultVIP6, server.IP6
		}
		for _, p := range EnginePorts {
			for _, proto := range []string{TCP, UDP} {
				out = append(out, Service{VIP: netip.MustParseAddr(vip), Port: p, Proto: proto,
					Backends: []Backend{{IP: netip.MustParseAddr(ip), Port: p, Pod: server.Name}}})
			}
		}
	}
	return out
}
