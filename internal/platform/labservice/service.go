// Package labservice is vnetlab's Kubernetes-like Service model: a clusterIP,
// port and protocol in front of pod backends, realised in a lab by a
// provider (iptables, nftables or ebpf: one file each) the way kube-proxy
// or an eBPF CNI would. The set of services of a lab lives in its state
// directory (services.json), so the CLI can change a running lab.
package labservice

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// Protocols a service may use.
const (
	TCP = "tcp"
	UDP = "udp"
)

// DefaultVIP is the seed's clusterIP (002: "iptables -t nat -A PREROUTING -d
// 10.96.0.100 -j DNAT"); `run` dials it on the service path.
const DefaultVIP = "10.96.0.100"

// DefaultVIP6 is the service path's IPv6 clusterIP (labs with IPv6), in
// fd00:10:96::/112, the IPv6 service range kind and kubeadm examples use.
const DefaultVIP6 = "fd00:10:96::100"

// EnginePorts are the ports vnetlab's engines listen on (iperf3 5201,
// sockperf 11111, the built-in rr engine 7001): the service path has one
// service per port and protocol, each leading to the server pod.
var EnginePorts = []uint16{engine.Iperf3Port, engine.SockperfPort, engine.RRPort}

// Service is clusterIP:port/proto in front of its backends.
type Service struct {
	VIP      netip.Addr `json:"vip"`
	Port     uint16     `json:"port"`
	Proto    string     `json:"proto"`
	Backends []Backend  `json:"backends"`
}

// Backend is one pod address and port a service forwards to.
type Backend struct {
	IP   netip.Addr `json:"ip"`
	Port uint16     `json:"port"`
	Pod  string     `json:"pod,omitempty"` // the lab pod holding IP ("" for generated services)
}

// Key identifies a service: two services may not share it.
type Key struct {
	VIP   netip.Addr
	Port  uint16
	Proto string
}

// String is the key as --service takes it: "10.96.0.100:5201/tcp", "[fd00:10:96::100]:5201/tcp".
func (k Key) String() string { return netip.AddrPortFrom(k.VIP, k.Port).String() + "/" + k.Proto }

// Key returns the service's identity.
func (s Service) Key() Key { return Key{s.VIP, s.Port, s.Proto} }

func (s Service) String() string { return s.Key().String() }

func (b Backend) String() string { return netip.AddrPortFrom(b.IP, b.Port).String() }

// ParseKey reads "10.96.0.100:5201", "10.96.0.100:5201/tcp", ".../udp" or
// "[fd00:10:96::100]:5201/tcp" (tcp when no protocol is given, as in Kubernetes).
func ParseKey(s string) (Key, error) {
	const example = "example: 10.96.0.100:5201/tcp or [fd00:10:96::100]:5201/tcp"
	hostport, proto := s, TCP
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		hostport, proto = s[:i], strings.ToLower(s[i+1:])
	}
	if proto != TCP && proto != UDP {
		return Key{}, fmt.Errorf("service %q: unknown protocol %q: use tcp or udp (%s)", s, proto, example)
	}
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return Key{}, fmt.Errorf("service %q: %v (%s)", s, err, example)
	}
	if port == "" {
		return Key{}, fmt.Errorf("service %q: no port (%s)", s, example)
	}
	ip, err := parseIP(host)
	if err != nil {
		return Key{}, fmt.Errorf("service %q: %v (%s)", s, err, example)
	}
	p, err := parsePort(port)
	if err != nil {
		return Key{}, fmt.Errorf("service %q: %v (%s)", s, err, example)
	}
	return Key{ip, p, proto}, nil
}

// BackendSpec is a backend as the user wrote it: an address or a pod name,
// with an optional port (the service's port when left out).
type BackendSpec struct {
	Host string // IP address or pod name
	Port uint16 // 0: same as the service
}

// ParseBackend reads "192.168.10.10:5201", "[fd00:10:244::a]:5201",
// "pod-a:5201", an address alone or "pod-a".
func ParseBackend(s string) (BackendSpec, error) {
	const example = "example: 192.168.10.10:5201, [fd00:10:244::a]:5201 or pod-a:5201"
	host, port, err := splitHostPort(s)
	if err != nil {
		return BackendSpec{}, fmt.Errorf("backend %q: %v (%s)", s, err, example)
	}
	if host == "" {
		return BackendSpec{}, fmt.Errorf("backend %q: no address or pod name (%s)", s, example)
	}
	b := BackendSpec{Host: host}
	if looksNumeric(host) {
		if _, err := parseIP(host); err != nil {
			return BackendSpec{}, fmt.Errorf("backend %q: %v (%s)", s, err, example)
		}
	} else if err := lab.ValidName("pod", host); err != nil {
		return BackendSpec{}, fmt.Errorf("backend %q: %v (%s)", s, err, example)
	}
	if port != "" {
		if b.Port, err = parsePort(port); err != nil {
			return BackendSpec{}, fmt.Errorf("backend %q: %v (%s)", s, err, example)
		}
	}
	return b, nil
}

// splitHostPort splits "host:port", "host", "[v6]:port" or "[v6]" (port ""
// when there is none).
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasSuffix(s, ":") {
		return "", "", fmt.Errorf("empty port")
	}
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", fmt.Errorf("no closing ] after the IPv6 address")
		}
		host, rest := s[1:end], s[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", fmt.Errorf("%q after the IPv6 address: want [ADDRESS]:PORT", rest)
		}
		return host, strings.TrimPrefix(rest, ":"), nil
	}
	if strings.Count(s, ":") > 1 {
		// fd00::a:80 is one address, or fd00::a and port 80: never guess.
		return "", "", fmt.Errorf("write an IPv6 address in brackets, [ADDRESS] or [ADDRESS]:PORT")
	}
	host, port, _ = strings.Cut(s, ":")
	return host, port, nil
}

// looksNumeric: an address rather than a pod name (pod names have no colon).
func looksNumeric(h string) bool {
	return strings.Trim(h, "0123456789.") == "" || strings.Contains(h, ":")
}

// parseIP reads a unicast IPv4 or IPv6 address (no zone, not IPv4-mapped).
func parseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
	}
	if ip.Zone() != "" || ip.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%q: write the address without a zone and IPv4 addresses as IPv4", s)
	}
	if ip.IsUnspecified() || ip.IsLoopback() || ip.IsMulticast() || (ip.Is6() && ip.IsLinkLocalUnicast()) || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return netip.Addr{}, fmt.Errorf("%s is not a unicast address", ip)
	}
	return ip, nil
}

func parsePort(s string) (uint16, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return uint16(p), nil
}
