// Package conformance runs upstream Kubernetes end-to-end specs against a
// local cluster, as a CNI or Service proxy is judged: it builds e2e.test and
// ginkgo from the pinned Kubernetes release (internal/kube/binaries), builds
// the test images the specs run under their upstream names, brings up a
// local cluster, loads the images, runs the specs in parallel, reports what
// upstream's summary says and which specs failed, and removes the cluster.
package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// DefaultSkip leaves out what a local cluster cannot have (cloud load
// balancers, IPv6 on an IPv4 cluster, SCTP, DNS beyond the cluster's), what
// disrupts the other specs running beside (Serial, Disruptive), what is
// slow, and features behind gates (Feature:).
const DefaultSkip = `DNS|LoadBalancer|Serial|Disruptive|Slow|ESIPP|IPv6|SCTP|Feature:`

// DefaultSkipIPv6 is DefaultSkip on a cluster with IPv6 (--ip-family ipv6
// or dual): it no longer skips IPv6.
const DefaultSkipIPv6 = `DNS|LoadBalancer|Serial|Disruptive|Slow|ESIPP|SCTP|Feature:`

// DualSkip is the dual suite's skip. Its focus selects the Feature:
// IPv6DualStack specs, so it cannot skip Feature: as a whole; what it
// leaves out of that focus is SCTP (the Feature:SCTPConnectivity specs: no
// SCTP in the local cluster's kernel modules, as in DefaultSkip) and the two
// Slow "update nodePort" specs (several minutes each); nothing of the focus
// needs a load balancer, Serial or Disruptive, kept for --focus variants.
const DualSkip = `LoadBalancer|Serial|Disruptive|Slow|SCTP`

// NetworkSkips are the groups of [sig-network] specs the network suite
// leaves out, each with why: only what needs a cloud, the Internet, SCTP, a
// disruptive serial run, another cluster family or a feature a local
// cluster does not have. Every other [sig-network] spec runs, Slow and
// DNS ones too (docs/conformance.md lists these groups).
var NetworkSkips = []struct{ Pattern, Why string }{
	{`LoadBalancer`, "a cloud's load balancer: nothing gives a Service an ingress IP on a local cluster"},
	{`Serial|Disruptive`, "a serial or disruptive run: they restart the API server or kube-proxy, delete the proxy's rules, or change cluster-wide defaults (DNS configuration, the default IngressClass) under the specs running beside"},
	{`SCTP`, "SCTP: this kernel has none (CONFIG_IP_SCTP unset), and the nodes share it"},
	{`IPv6`, "IPv6 on an IPv4 cluster: the dual suite (--ip-family dual) runs the dual-stack ones"},
	{`Provider:`, "a cloud provider's machinery (gce, aws, azure)"},
	{`Feature:Networking-(IPv4|DNS)`, "the Internet (they reach google.com or 8.8.8.8), which a local cluster is not given"},
	{`Feature:NetworkPolicy`, "NetworkPolicy: the netpol suite runs them, on a cluster whose enforcer is vnetlab's or kube-router's"},
	{`Feature:LocalhostNodePorts|Feature:KubeProxyNFAcct`, "kube-proxy iptables mode's own behaviours: NodePorts on 127.0.0.1 (route_localnet; one spec pulls an image through one from a registry) and nfacct counters in its /metrics"},
	{`Feature:Networking-Performance|Feature:PerformanceDNS`, "benchmarks (iperf2 between nodes; DNS with the most Services a cluster may have), not a behaviour that passes or fails"},
}

// networkSkip is the network suite's skip: NetworkSkips' patterns.
func networkSkip() string {
	var p []string
	for _, g := range NetworkSkips {
		p = append(p, g.Pattern)
	}
	return strings.Join(p, "|")
}

// NetpolSkip is the netpol suite's skip: upstream's [sig-network] Netpol
// specs keep their [Feature:NetworkPolicy] label (the usual Feature: skip
// would drop 46 of them); only the SCTP connectivity specs
// ([Feature:SCTPConnectivity]) are left out, as this kernel has no SCTP
// (CONFIG_IP_SCTP unset) and the nodes share it. The two specs about a
// policy naming SCTP (that it is not taken for TCP, that it isolates) send
// TCP only and run.
const NetpolSkip = `\[Feature:SCTPConnectivity\]`

// Suite is a named set of specs: a ginkgo focus and skip.
type Suite struct {
	Name, Focus, Skip, About string
	// Family, when set, is the cluster's IP family the suite needs (its
	// specs fail on any other): the default, and the only one accepted.
	Family family.Family
	// Policy: the specs need a NetworkPolicy enforcer (a cluster whose
	// enforcer is none is refused).
	Policy bool
}

// skip is the suite's skip on a cluster of family f: DefaultSkip becomes
// DefaultSkipIPv6 where the cluster has IPv6.
func (x Suite) skip(f family.Family) string {
	if x.Skip == DefaultSkip && f.HasIPv6() {
		return DefaultSkipIPv6
	}
	return x.Skip
}

// Suite names.
const (
	Services         = "services"
	GranularServices = "granular-services"
	Conntrack        = "conntrack"
	Smoke            = "smoke"
	Dual             = "dual"
	DualSmoke        = "dual-smoke"
	Network          = "network"
	Netpol           = "netpol"
	NetpolSmoke      = "netpol-smoke"
)

// SmokeSpecs are the specs of the smoke suite (`make test` runs them): the
// Service behaviours a kube-proxy replacement most easily gets wrong, each
// upstream's full name, plus plain ClusterIP and NodePort specs, and one of
// each group the network suite added: DNS through the proxy (UDP and TCP 53,
// both queriers' images), Traffic Distribution (zones, node hints and the
// fallback when the local endpoint goes) and kube-proxy's health URLs.
// Their longest, the NodePort sessionAffinity timeout, takes about 140 s.
var SmokeSpecs = []string{
	`[sig-network] Services should serve a basic endpoint from pods`,
	`[sig-network] Services should be able to create a functioning NodePort service`,
	`[sig-network] Services should implement service.kubernetes.io/service-proxy-name`,
	`[sig-network] Services should implement service.kubernetes.io/headless`,
	`[sig-network] Services should be possible to connect to a service via ExternalIP when the external IP is not assigned to a node`,
	`[sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes`,
	`[sig-network] Services should have session affinity timeout work for NodePort service`,
	`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service`,
	`[sig-network] Conntrack should be able to cleanup conntrack entries when UDP service target port changes for a NodePort service`,
	`[sig-network] DNS should provide DNS for services`,
	`[sig-network] Traffic Distribution should route traffic to an endpoint in the same zone when using PreferClose`,
	`[sig-network] Traffic Distribution should route traffic to an endpoint on the same node when using PreferSameNode and fall back when the endpoint becomes unavailable`,
	`[sig-network] Networking should check kube-proxy urls`,
}

// DualSmokeSpecs are the specs of the dual-stack smoke suite (`make test`
// runs them): the dual-stack pods, nodes and Services specs, a few seconds
// each, and pod to Service traffic over the secondary family (IPv6), the
// longest at about 50 s.
var DualSmokeSpecs = []string{
	`[sig-network] [Feature:IPv6DualStack] should have at least one dual-stack node`,
	`[sig-network] [Feature:IPv6DualStack] should create pod, add ipv6 and ipv4 ip to pod ips`,
	`[sig-network] [Feature:IPv6DualStack] should create pod, add ipv6 and ipv4 ip to host ips`,
	`[sig-network] [Feature:IPv6DualStack] should create service with ipv4 cluster ip`,
	`[sig-network] [Feature:IPv6DualStack] should create service with ipv6 cluster ip`,
	`[sig-network] [Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip`,
	`[sig-network] [Feature:IPv6DualStack] should create service with ipv6,v4 cluster ip`,
	`[sig-network] [Feature:IPv6DualStack] should create a single stack service with cluster ip from primary service range`,
	`[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: http`,
	`[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: udp`,
}

// NetpolSmokeSpecs are the specs of the netpol smoke suite (`make test`
// runs them): default deny, pod and namespace selectors together, an
// ipBlock with an except, a named port, egress denied on the client side,
// a live pod's label change, each upstream's full name.
var NetpolSmokeSpecs = []string{
	`[sig-network] Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy`,
	`[sig-network] Netpol NetworkPolicy between server and client should enforce policy based on PodSelector and NamespaceSelector`,
	`[sig-network] Netpol NetworkPolicy between server and client should enforce except clause while egress access to server in CIDR block`,
	`[sig-network] Netpol NetworkPolicy between server and client should allow ingress access on one named port`,
	`[sig-network] Netpol NetworkPolicy between server and client should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)`,
	`[sig-network] Netpol NetworkPolicy between server and client should deny ingress access to updated pod`,
}

// Suites are the named suites (--suite).
var Suites = []Suite{
	{Name: Services, Focus: `\[sig-network\] Services`, Skip: DefaultSkip,
		About: "every [sig-network] Services spec a local cluster can run (47 in v1.37.2)"},
	{Name: GranularServices, Focus: `\[sig-network\] Networking Granular Checks: Services`, Skip: DefaultSkip,
		About: "pod, node and endpoint to Service traffic over TCP, UDP and HTTP"},
	{Name: Conntrack, Focus: `\[sig-network\] Conntrack`, Skip: DefaultSkip,
		About: "UDP flows across backend changes, invalid conntrack state"},
	{Name: Network, Focus: `\[sig-network\]`, Skip: networkSkip(),
		About: "every [sig-network] spec a local IPv4 cluster can run, DNS and Traffic Distribution included (132 in v1.37.2; docs/conformance.md lists what it skips and why)"},
	{Name: Netpol, Focus: `\[sig-network\] Netpol`, Skip: NetpolSkip, Policy: true,
		About: "every [sig-network] Netpol spec this kernel can run: 48 of v1.37.2's 51 (the 3 SCTP connectivity specs need SCTP in the kernel); a cluster with a NetworkPolicy enforcer"},
	{Name: NetpolSmoke, Focus: wholeNames(NetpolSmokeSpecs), Skip: NetpolSkip, Policy: true,
		About: fmt.Sprintf("%d Netpol specs, one per kind of peer and port (make test runs them)", len(NetpolSmokeSpecs))},
	{Name: Smoke, Focus: wholeNames(SmokeSpecs), Skip: networkSkip(),
		About: fmt.Sprintf("%d specs of the behaviours a proxy most easily gets wrong (make test runs them)", len(SmokeSpecs))},
	{Name: Dual, Focus: `\[Feature:IPv6DualStack\]|\[sig-network\] Networking Granular Checks`, Skip: DualSkip, Family: family.Dual,
		About: "dual-stack pods, nodes and Services, and pod, node and Service traffic over each family (41 in v1.37.2; --ip-family dual)"},
	{Name: DualSmoke, Focus: wholeNames(DualSmokeSpecs), Skip: DualSkip, Family: family.Dual,
		About: fmt.Sprintf("%d specs of the dual suite, the quick ones and pod to Service over IPv6 (make test runs them)", len(DualSmokeSpecs))},
}

// wholeNames is a focus selecting each of specs by its whole name (ginkgo
// matches the suite's description, a space and the name): the name, then
// only the bracketed tags upstream appends ([LinuxOnly], [Conformance]), so
// that a longer spec starting with the same words is left out.
func wholeNames(specs []string) string {
	q := make([]string, len(specs))
	for i, s := range specs {
		q[i] = regexp.QuoteMeta(s)
	}
	return `(` + strings.Join(q, "|") + `)( \[[^]]+\])*$`
}

// SuiteNames lists --suite's values.
func SuiteNames() []string {
	var n []string
	for _, s := range Suites {
		n = append(n, s.Name)
	}
	return n
}

// Defaults of a run.
const (
	DefaultSuite   = Services
	DefaultCluster = "conf"
	DefaultNodes   = 3 // "NodePort and HealthCheckNodePort ... ExternalTrafficPolicy changes" needs 3
	DefaultProcs   = 3 // ginkgo processes: measured fine on 2 vCPUs
	DefaultZones   = 3 // one per node: the Traffic Distribution and Topology Hints specs need 3
	DefaultProxy   = clusternet.VnetlabEBPF
	DefaultTimeout = 2 * time.Hour
)

// Spec is one conformance run.
type Spec struct {
	// Cluster is the local cluster to run against. An empty CNI means
	// vnetlab's CNI when a mode is given, else vnetlab's CNI in mode
	// veth-ebpf with vnetlab's proxies and Debian's bridge plugin with
	// kube-proxy (the stock baseline).
	Cluster cluster.Spec
	// Suite names a preset focus and skip; Focus and Skip, when set,
	// replace the preset's.
	Suite, Focus, Skip string
	// Procs is the number of ginkgo processes running specs in parallel.
	Procs int
	// FlakeAttempts > 1 reruns a failed spec up to that many times in all
	// (ginkgo --flake-attempts); a spec that passes on a rerun is reported
	// as flaky, not failed.
	FlakeAttempts int
	// ReportDir receives ginkgo's JSON and JUnit reports and its log.
	ReportDir string
	// Timeout bounds the specs' run (ginkgo --timeout).
	Timeout time.Duration
}

// Resolve fills the defaults, applies the suite's focus and skip and checks
// the result: one error naming the problem and the fix.
func (s Spec) Resolve() (Spec, error) {
	if s.Suite == "" {
		s.Suite = DefaultSuite
	}
	i := slices.IndexFunc(Suites, func(x Suite) bool { return x.Name == s.Suite })
	if i < 0 {
		return s, fmt.Errorf("--suite %q: choose %s, or give --focus", s.Suite, strings.Join(SuiteNames(), ", "))
	}
	c := &s.Cluster
	suite := Suites[i]
	if c.Family == "" {
		c.Family = suite.Family.Or()
	}
	f, err := family.Parse(string(c.Family))
	if err != nil {
		return s, fmt.Errorf("--ip-family %q: use ipv4, ipv6 or dual", c.Family)
	}
	c.Family = f
	if suite.Family != "" && c.Family != suite.Family {
		return s, fmt.Errorf("--suite %s with --ip-family %s: its specs need a %s cluster: use --ip-family %s", s.Suite, c.Family, suite.Family, suite.Family)
	}
	if s.Focus == "" {
		s.Focus = suite.Focus
	}
	if s.Skip == "" {
		s.Skip = suite.skip(c.Family)
	}
	for flag, re := range map[string]string{"--focus": s.Focus, "--skip": s.Skip} {
		if _, err := regexp.Compile(re); err != nil {
			return s, fmt.Errorf("%s %q is not a regular expression (%v): brackets are escaped as \\[", flag, re, err)
		}
	}
	if c.Name == "" {
		c.Name = DefaultCluster
	}
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Zones == 0 {
		c.Zones = min(DefaultZones, c.Nodes)
	}
	if c.Proxy == "" {
		c.Proxy = DefaultProxy
	}
	if c.CNI == "" {
		switch {
		case c.CNIMode != "":
			c.CNI = clusternet.CNIVnetlab
		case clusternet.IsVnetlab(c.Proxy):
			c.CNI, c.CNIMode = clusternet.CNIVnetlab, defaultMode(c.Family, suite.Policy)
		default:
			c.CNI = clusternet.CNIBridge
		}
	}
	if err := c.Validate(); err != nil {
		return s, err
	}
	if suite.Policy {
		if e, _ := clusternet.GetEnforcer(c.Network().Policy); !e.Enforces {
			return s, fmt.Errorf("--suite %s on a cluster whose NetworkPolicy enforcer is %s: its specs need one: use --network-policy %s|%s", s.Suite, c.Network().Policy, clusternet.PolicyVnetlab, clusternet.PolicyKubeRouter)
		}
	}
	if s.Procs == 0 {
		s.Procs = DefaultProcs
	}
	if s.Procs < 1 {
		return s, fmt.Errorf("--procs %d: at least one ginkgo process runs the specs", s.Procs)
	}
	if s.FlakeAttempts < 1 {
		s.FlakeAttempts = 1
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.ReportDir == "" {
		s.ReportDir = "conformance/" + s.Name()
	}
	return s, nil
}

// defaultMode is vnetlab's CNI mode with vnetlab's proxies: veth-ebpf, or
// veth-routed on a cluster with IPv6 while veth-ebpf wires IPv4 pods only,
// or for specs that need a NetworkPolicy enforcer (policy) while
// vnetlab's cannot see veth-ebpf's packets.
func defaultMode(f family.Family, policy bool) string {
	m, err := modes.Get(modes.VethEBPF)
	if err == nil && (f.HasIPv6() && !m.IPv6 || policy && m.NodeFilterUnseen(nil) != "") {
		return modes.VethRouted
	}
	return modes.VethEBPF
}

// selection says which specs were asked for: the suite, or the focus and
// skip that replace its own.
func (s Spec) selection() string {
	for _, x := range Suites {
		if x.Name == s.Suite && x.Focus == s.Focus && x.skip(s.Cluster.Family) == s.Skip {
			return "suite " + s.Suite
		}
	}
	return fmt.Sprintf("focus %s, skip %s", s.Focus, s.Skip)
}

// Name says what ran against what, for report directories and messages:
// "services-vnetlab-ebpf-socketlb-vnetlab-veth-ebpf", with the family on
// clusters with IPv6: "dual-iptables-bridge-dual".
func (s Spec) Name() string {
	c := s.Cluster
	n := []string{s.Suite, c.Proxy}
	if c.SocketLB {
		n = append(n, "socketlb")
	}
	n = append(n, c.CNI)
	if c.CNIMode != "" {
		n = append(n, c.CNIMode)
	}
	if f := c.Family.Or(); f != family.IPv4 {
		n = append(n, string(f))
	}
	if p := c.Network().Policy; p != clusternet.PolicyNone && p != clusternet.PolicyVnetlab {
		n = append(n, p) // vnetlab's is named by its CNI already
	}
	return strings.Join(n, "-")
}
