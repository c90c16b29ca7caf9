package labpolicy

import (
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// The policies knob's set (docs/policies-cost.md): a measured flow
// from a client pod to a server pod, which N generated policies must be
// checked against without matching it, plus the one policy that allows
// it, so the measured path pays the lookup. Every generated policy selects
// the server pod and allows ingress from an address block no pod is in
// (one /32 or /128 each); the ipblocks knob adds one policy allowing M
// such blocks. The allowing policy comes last; nftables and iptables walk
// a pod's rules bucket by bucket (Allow.Hash), so the measured flow pays
// the buckets walked before the allowing rule's, and a denied packet all
// of them. It admits the client on the measured ports only: a connection
// to DeniedPort is what the policies deny, the probe of a cell's proof.

// The address blocks generated peers are taken from, one address each:
// RFC 2544's benchmarking range and the shared address space for IPv4,
// the documentation range for IPv6. A lab whose pods are in one is refused.
var (
	policyPeers4 = netip.MustParsePrefix("198.18.0.0/15")
	policyPeers6 = netip.MustParsePrefix("2001:db8:4400::/48")
	blockPeers4  = netip.MustParsePrefix("100.64.0.0/10")
	blockPeers6  = netip.MustParsePrefix("2001:db8:4401::/48")
)

// MaxGenerated is the most generated peers of a kind: 198.18.0.0/15's addresses.
const MaxGenerated = 1 << 17

// DeniedPort is the port the allowing policy leaves out: the deny probe's
// (TCP; the discard service, which no engine uses).
const DeniedPort = 9

// The generated policies' names.
const (
	GeneratedPrefix = "vnl-gen-"
	AllowName       = "vnl-allow"
	BlocksName      = "vnl-ipblocks"
)

// BenchSet is a generated policy set: Policies policies and IPBlocks
// blocks the flows from Clients to Server on Ports (each TCP and UDP) must
// be checked against, and the policy that allows them.
type BenchSet struct {
	Policies, IPBlocks int
	Server             lab.PodState
	Clients            []lab.PodState
	Ports              []uint16
}

// Doc is the set as a policy file, for lab st whose policies are c (the
// server's and the clients' namespaces and labels are theirs there): the
// generated policies, then the one allowing the flows.
func (b BenchSet) Doc(st *lab.State, c *Config) (netpol.Doc, error) {
	gen, allow, err := b.policies(st, c)
	return netpol.Doc{Policies: append(gen, allow)}, err
}

// policies are the generated policies and the allowing one.
func (b BenchSet) policies(st *lab.State, c *Config) ([]networkingv1.NetworkPolicy, networkingv1.NetworkPolicy, error) {
	var none networkingv1.NetworkPolicy
	w, err := c.World(st)
	if err != nil {
		return nil, none, err
	}
	find := func(name string) *netpol.Pod {
		for i := range w.Pods {
			if w.Pods[i].Name == name {
				return &w.Pods[i]
			}
		}
		return nil
	}
	server := find(b.Server.Name)
	if server == nil {
		return nil, none, fmt.Errorf("lab %s has no pod %s", st.Name, b.Server.Name)
	}
	var clients []netpol.Pod
	for _, cl := range b.Clients {
		p := find(cl.Name)
		if p == nil {
			return nil, none, fmt.Errorf("lab %s has no pod %s", st.Name, cl.Name)
		}
		clients = append(clients, *p)
	}
	return Generate(b.Policies, b.IPBlocks, *server, clients, w.Pods, st.Spec.Family.HasIPv4(), st.Spec.Family.HasIPv6(), b.Ports)
}

// Generate is the set of policies generated policies and one of ipblocks
// blocks selecting server, and the policy allowing clients to reach it on
// ports (TCP and UDP), with peers of IPv4 (v4) and IPv6 (v6); pods are
// every pod, none of which may be in the generated peers' ranges. A lab's
// set (BenchSet) and a cluster's (`kube run`, created through its API:
// internal/kube/bench/policies.go) are both made here.
func Generate(policies, ipblocks int, server netpol.Pod, clients, pods []netpol.Pod, v4, v6 bool, ports []uint16) ([]networkingv1.NetworkPolicy, networkingv1.NetworkPolicy, error) {
	var none networkingv1.NetworkPolicy
	if policies > MaxGenerated || ipblocks > MaxGenerated {
		return nil, none, fmt.Errorf("%d policies and %d ipblocks: at most %d each are generated", policies, ipblocks, MaxGenerated)
	}
	for _, p := range pods {
		for _, a := range p.IPs {
			for _, r := range []netip.Prefix{policyPeers4, policyPeers6, blockPeers4, blockPeers6} {
				if r.Contains(a) {
					return nil, none, fmt.Errorf("pod %s's address %s is in %s, where the generated policies' peers are: use another pod network", p.Name, a, r)
				}
			}
		}
	}
	peers := func(i int, r4, r6 netip.Prefix) []networkingv1.NetworkPolicyPeer {
		var out []networkingv1.NetworkPolicyPeer
		if v4 {
			out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: nth(r4, i).String() + "/32"}})
		}
		if v6 {
			out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: nth(r6, i).String() + "/128"}})
		}
		return out
	}
	policy := func(name string, rule networkingv1.NetworkPolicyIngressRule) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: netpol.KindNetworkPolicy},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: server.Namespace},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: server.Labels},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{rule},
			},
		}
	}
	var gen []networkingv1.NetworkPolicy
	for i := range policies {
		gen = append(gen, policy(GeneratedPrefix+strconv.Itoa(i), networkingv1.NetworkPolicyIngressRule{From: peers(i, policyPeers4, policyPeers6)}))
	}
	if ipblocks > 0 {
		var from []networkingv1.NetworkPolicyPeer
		for i := range ipblocks {
			from = append(from, peers(i, blockPeers4, blockPeers6)...)
		}
		gen = append(gen, policy(BlocksName, networkingv1.NetworkPolicyIngressRule{From: from}))
	}
	var allow networkingv1.NetworkPolicyIngressRule
	for _, cl := range clients {
		allow.From = append(allow.From, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: cl.Namespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: cl.Labels},
		})
	}
	for _, proto := range []netpol.Proto{netpol.TCP, netpol.UDP} {
		for _, port := range ports {
			pr := corev1.Protocol(proto)
			pt := intstr.FromInt32(int32(port))
			allow.Ports = append(allow.Ports, networkingv1.NetworkPolicyPort{Protocol: &pr, Port: &pt})
		}
	}
	return gen, policy(AllowName, allow), nil
}

// nth is the i-th address of r.
func nth(r netip.Prefix, i int) netip.Addr {
	n := new(big.Int).SetBytes(r.Addr().AsSlice())
	n.Add(n, big.NewInt(int64(i)))
	b := n.FillBytes(make([]byte, len(r.Addr().AsSlice())))
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Setup loads set b into lab st with provider, as the lab's policies (a
// lab without any yet), and returns the saved config (its LoadSeconds).
func Setup(st *lab.State, provider string, b BenchSet) (*Config, error) {
	old, err := Load(st.Name)
	if err != nil {
		return nil, err
	}
	if old.Installed || len(old.Policies) > 0 {
		return nil, fmt.Errorf("lab %s already has policies: the policies knob loads its own into a lab without any", st.Name)
	}
	c := &Config{Provider: provider}
	d, err := b.Doc(st, c)
	if err != nil {
		return nil, err
	}
	c.Policies = d.Policies // a new config: Merge's look-up per policy would be quadratic in them
	if err := Commit(st, nil, c); err != nil {
		return nil, err
	}
	return c, nil
}

// CellProof is the proof that a cell's policy set was in force: Begin,
// before the cell's proof sample, reads the provider's objects back and
// counts them against the compiled rules, then probes a flow the policies
// deny (client to DeniedPort of Server) and sees it refused and counted;
// End, after the sample, sees the provider's evaluated count grow.
type CellProof struct {
	Lab      *lab.State
	Provider string
	ClientNS string
	Server   netip.Addr // the server pod's address of the cell's family
	CellSeen            // filled by Begin and End
	probed   Proof
}

// CellSeen is what a cell's policy proof saw (a lab's CellProof, a
// cluster's): the enforcer's objects read back and those the compiled
// policies make, the denied flow and what became of it, the enforcer's
// denied count over that probe and its evaluated count over the proof
// sample. The runner files it in the cell's proof (runner.PolicyProver).
type CellSeen struct {
	Objects, Want          int
	Probe                  string
	ProbeDenied, Evaluated uint64
}

// deniedWait: a denied connection's SYN is dropped, so connect waits this
// long; an allowed one is refused (nothing listens) within milliseconds.
const deniedWait = time.Second

// Begin proves the objects and the deny probe; "" or why the policy set
// is not in force.
func (c *CellProof) Begin() string {
	p, err := Prove(c.Lab, c.Provider)
	if err != nil {
		return err.Error()
	}
	c.Objects, c.Want = p.Objects, p.Want
	if p.Want == 0 || p.Objects != p.Want {
		return fmt.Sprintf("policy provider %s holds %d objects where the compiled policies make %d", c.Provider, p.Objects, p.Want)
	}
	addr := net.JoinHostPort(c.Server.String(), strconv.Itoa(DeniedPort))
	c.Probe = "tcp " + addr
	err = nsutil.Do(c.ClientNS, func() error {
		conn, err := net.DialTimeout("tcp", addr, deniedWait)
		if err == nil {
			conn.Close()
		}
		return err
	})
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		c.Probe += ": not dropped"
		return fmt.Sprintf("a connection the policies deny (%s) was not dropped: %v", addr, err)
	}
	c.Probe += ": dropped"
	if c.probed, err = Prove(c.Lab, c.Provider); err != nil {
		return err.Error()
	}
	c.ProbeDenied = c.probed.Denied - p.Denied
	if c.ProbeDenied == 0 {
		return fmt.Sprintf("a connection the policies deny (%s) was dropped, but not by policy provider %s (its denied count stayed %d)", addr, c.Provider, p.Denied)
	}
	return ""
}

// End proves that the proof sample's packets were evaluated; "" or why not.
func (c *CellProof) End() string {
	p, err := Prove(c.Lab, c.Provider)
	if err != nil {
		return err.Error()
	}
	c.Evaluated = p.Evaluated - c.probed.Evaluated
	if c.Evaluated == 0 {
		return fmt.Sprintf("policy provider %s evaluated none of the proof sample's packets (its evaluated count stayed %d)", c.Provider, p.Evaluated)
	}
	return ""
}

// Seen is what Begin and End saw (runner.PolicyProver).
func (c *CellProof) Seen() CellSeen { return c.CellSeen }

// Prove asks provider what lab st's data plane holds.
func Prove(st *lab.State, provider string) (Proof, error) {
	p, err := Get(provider)
	if err != nil {
		return Proof{}, err
	}
	pr, err := p.Prove(st)
	if err != nil {
		return pr, fmt.Errorf("policy provider %s: reading its objects back: %w", provider, err)
	}
	return pr, nil
}
