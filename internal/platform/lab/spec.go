// Package lab owns the lifecycle of a lab: validation, building it in
// namespaces vnetlab creates, the state directory, locking, and cleanup.
package lab

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Defaults from seed 002: pod-a 192.168.10.10, pod-b 192.168.10.11 in 192.168.10.0/24.
const (
	DefaultPodCIDR  = "192.168.10.0/24"
	DefaultFirstPod = 10 // host offset of the first pod address
	DefaultPods     = 2
	MaxNameLen      = 15 // IFNAMSIZ-1: names may end up in interface names
)

// Spec says what to build. It comes from flags or a scenario file.
type Spec struct {
	Name    string            `json:"name"`
	Mode    string            `json:"mode"`
	Pods    []PodSpec         `json:"pods"`
	PodCIDR string            `json:"pod_cidr"`
	Options map[string]string `json:"options,omitempty"`
	// Nodes is the number of node namespaces (0 or 1: one node). With 2, the
	// nodes are joined by a veth underlay and pods alternate between them.
	Nodes        int    `json:"nodes,omitempty"`
	UnderlayRate string `json:"underlay_rate,omitempty"` // tbf rate on the underlay, e.g. 10gbit
	// Knobs are the lab knobs set on the lab once it is built (knobs.go;
	// internal/measure/knob: its links' MTU, GSO/GRO sizes and offloads,
	// its pods' qdisc and congestion control, ...); "": the mode's own.
	Knobs knob.Values `json:"knobs,omitempty"`
	// Family is the pods' IP family: ipv4 ("" in state written before
	// families existed), ipv6 or dual (family.go).
	Family family.Family `json:"family,omitempty"`
	// PodCIDR6 is the pods' IPv6 network (ipv6 and dual; DefaultPodCIDR6).
	PodCIDR6 string `json:"pod_cidr6,omitempty"`
}

// MaxNodes is how many nodes a lab can have (one underlay veth joins two).
const MaxNodes = 2

// NodeCount returns the number of nodes (at least 1).
func (s *Spec) NodeCount() int {
	if s.Nodes < 1 {
		return 1
	}
	return s.Nodes
}

// PodNode returns the index of the node pod i is placed on: pods alternate
// between nodes (pod-a on node1, pod-b on node2, ...), so that the default
// client (pod-b) and server (pod-a) are on different hosts.
func (s *Spec) PodNode(i int) int { return i % s.NodeCount() }

// PodSpec is one pod: its name and addresses (IP6 in ipv6 and dual labs;
// IP is empty in an ipv6 lab).
type PodSpec struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	IP6  string `json:"ip6,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// ValidName checks a lab or pod name: short enough for an interface name,
// and made of characters safe in namespace and interface names.
func ValidName(kind, n string) error {
	if n == "" {
		return fmt.Errorf("%s name is empty", kind)
	}
	if len(n) > MaxNameLen {
		return fmt.Errorf("%s name %q is %d characters; the limit is %d (Linux interface names): choose a shorter name", kind, n, len(n), MaxNameLen)
	}
	if !nameRE.MatchString(n) {
		return fmt.Errorf("%s name %q: use lower-case letters, digits and '-' (not at the ends)", kind, n)
	}
	return nil
}

// PodName returns the default name of the i-th pod: pod-a, pod-b, ..., pod-z, pod-aa, ...
func PodName(i int) string {
	s := ""
	for i >= 0 {
		s = string(rune('a'+i%26)) + s
		i = i/26 - 1
	}
	return "pod-" + s
}

// DefaultPodSpecs makes n pods named pod-a.. with addresses from .10 upwards
// (of each node's share of the pod network when there are several nodes).
func DefaultPodSpecs(n int, cidr string, nodes int) ([]PodSpec, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("pod_cidr %q is not a CIDR (example: %s)", cidr, DefaultPodCIDR)
	}
	addrs, err := podAddrs(n, ipnet, nodes)
	if err != nil {
		return nil, err
	}
	pods := make([]PodSpec, n)
	for i := range pods {
		pods[i] = PodSpec{Name: PodName(i), IP: addrs[i].String()}
	}
	return pods, nil
}

// podAddrs are the addresses of n pods in ipnet: from .10 upwards of each
// node's share, pods alternating between nodes.
func podAddrs(n int, ipnet *net.IPNet, nodes int) ([]net.IP, error) {
	if n < 0 {
		return nil, field.Errorf("pods", "pod count %d is negative: use {pods} 0 or more", n)
	}
	if nodes < 1 {
		nodes = 1
	}
	parts := splitNet(ipnet, nodes)
	ones, bits := parts[0].Mask.Size()
	perNode := (n + nodes - 1) / nodes
	if hostBits := bits - ones; hostBits < 31 && DefaultFirstPod+perNode-1 > (1<<hostBits)-2 {
		return nil, fmt.Errorf("%d pods do not fit in %s (addresses .%d and up of each node's share): use a larger pod_cidr", n, ipnet, DefaultFirstPod)
	}
	addrs := make([]net.IP, n)
	for i := range addrs {
		addrs[i] = modes.NthIP(parts[i%nodes], DefaultFirstPod+i/nodes)
	}
	return addrs, nil
}

// Validate checks everything that can be checked before touching the kernel,
// so that bad input never leaves anything half-built.
func (s *Spec) Validate() error {
	_, err := s.resolve()
	return err
}

// resolve is Validate, which resolves the mode's name (the one place a
// lab's mode name becomes its mode, for Up).
func (s *Spec) resolve() (modes.Mode, error) {
	if err := ValidName("lab", s.Name); err != nil {
		return modes.Mode{}, err
	}
	m, err := modes.Get(s.Mode)
	if err != nil {
		return m, err
	}
	if err := s.Knobs.Check(); err != nil {
		return m, err
	}
	return m, s.check(m)
}

// check is Validate with the mode resolved.
func (s *Spec) check(m modes.Mode) error {
	if s.PodCIDR == "" {
		s.PodCIDR = DefaultPodCIDR
	}
	if err := s.checkFamily(m); err != nil {
		return err
	}
	_, ipnet, err := net.ParseCIDR(s.PodCIDR)
	if err != nil || ipnet.IP.To4() == nil {
		return fmt.Errorf("pod_cidr %q is not an IPv4 CIDR (example: %s)", s.PodCIDR, DefaultPodCIDR)
	}
	seenName := map[string]bool{}
	for _, p := range s.Pods {
		if err := ValidName("pod", p.Name); err != nil {
			return err
		}
		if p.Name == "node" || p.Name == "ext" {
			return fmt.Errorf("pod name %q is reserved for the lab's node namespaces: choose another", p.Name)
		}
		if seenName[p.Name] {
			return fmt.Errorf("pod name %q is used twice", p.Name)
		}
		seenName[p.Name] = true
	}
	if s.Family.HasIPv4() {
		if err := s.checkPodAddrs(ipnet, "pod_cidr", s.PodCIDR, func(p PodSpec) string { return p.IP }); err != nil {
			return err
		}
	}
	if s.Nodes < 0 || s.Nodes > MaxNodes {
		return fmt.Errorf("nodes %d: a lab has 1 or %d nodes", s.Nodes, MaxNodes)
	}
	if s.NodeCount() > 1 {
		if !m.CrossHost {
			return field.Errorf("nodes", "mode %s is same-host only: {nodes} %d works with %s", s.Mode, s.Nodes, strings.Join(modes.CrossHostModes(), ", "))
		}
		if s.Family.HasIPv4() {
			if err := s.checkPlacement(ipnet, s.PodCIDR, func(p PodSpec) string { return p.IP }); err != nil {
				return err
			}
		}
	}
	if err := s.checkPods6(); err != nil {
		return err
	}
	if s.NodeCount() < m.MinNodes {
		return field.Errorf("nodes", "mode %s joins nodes: use {nodes} %d", s.Mode, m.MinNodes)
	}
	if s.UnderlayRate != "" {
		if s.NodeCount() < 2 {
			return field.Errorf("underlay_rate", "{underlay_rate} shapes the link between nodes: it needs {nodes} 2")
		}
		if _, err := ParseRate(s.UnderlayRate); err != nil {
			return err
		}
	}
	if len(s.Pods) < m.MinPods {
		return fmt.Errorf("mode %s needs at least %d pods (got %d)", s.Mode, m.MinPods, len(s.Pods))
	}
	for k, v := range s.Options {
		opt, ok := m.Option(k)
		if !ok {
			return fmt.Errorf("mode %s has no option %q%s", s.Mode, k, optionHint(m))
		}
		if opt.Check != nil {
			if err := opt.Check(v); err != nil {
				return err
			}
		}
	}
	if err := m.CheckPodCount(len(s.Pods), s.NodeCount(), s.Options); err != nil {
		return err
	}
	return modes.Available(m)
}

// checkPodAddrs checks the pods' addresses of one family (addr picks a
// pod's) in their network n, given as cidr in the field key: each is of
// n's family, inside n, not reserved, not the pods' gateway (the first
// address), not another pod's.
func (s *Spec) checkPodAddrs(n *net.IPNet, key, cidr string, addr func(PodSpec) string) error {
	fam, v6 := "IPv4", n.IP.To4() == nil
	if v6 {
		fam = "IPv6"
	}
	gw, bcast := modes.NthIP(n, 1), net.IP(nil)
	if !v6 {
		bcast = modes.NthIP(n, (1<<(32-maskOnes(n)))-1)
	}
	seen := map[string]string{}
	for _, p := range s.Pods {
		ip := net.ParseIP(addr(p))
		if ip == nil || (ip.To4() == nil) != v6 {
			return fmt.Errorf("pod %s: address %q is not an %s address", p.Name, addr(p), fam)
		}
		if !n.Contains(ip) {
			return fmt.Errorf("pod %s: address %s is outside %s %s", p.Name, ip, key, cidr)
		}
		switch {
		case v6 && ip.Equal(n.IP):
			return fmt.Errorf("pod %s: address %s is the subnet-router anycast address of %s", p.Name, ip, cidr)
		case !v6 && (ip.Equal(n.IP) || ip.Equal(bcast)):
			return fmt.Errorf("pod %s: address %s is the network or broadcast address of %s", p.Name, ip, cidr)
		case ip.Equal(gw):
			return fmt.Errorf("address clash: pod %s has %s, the pods' gateway address in %s: pick another address", p.Name, ip, cidr)
		}
		if other, ok := seen[ip.String()]; ok {
			return fmt.Errorf("address clash: pods %s and %s both have %s", other, p.Name, ip)
		}
		seen[ip.String()] = p.Name
	}
	return nil
}

// checkPlacement checks that each pod's address of one family (addr) is in
// its node's share of n (cidr as given).
func (s *Spec) checkPlacement(n *net.IPNet, cidr string, addr func(PodSpec) string) error {
	parts := splitNet(n, s.NodeCount())
	for i, p := range s.Pods {
		if k := s.PodNode(i); !parts[k].Contains(net.ParseIP(addr(p))) {
			return fmt.Errorf("pod %s is placed on node%d, whose share of %s is %s, but has address %s", p.Name, k+1, cidr, parts[k], addr(p))
		}
	}
	return nil
}

func maskOnes(n *net.IPNet) int { o, _ := n.Mask.Size(); return o }

func optionHint(m modes.Mode) string {
	if len(m.Options) == 0 {
		return " (it takes no options)"
	}
	var n []string
	for _, opt := range m.Options {
		n = append(n, opt.Name)
	}
	return " (known: " + strings.Join(n, ", ") + ")"
}
