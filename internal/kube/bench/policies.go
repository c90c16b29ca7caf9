package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/kube/netpolicy"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// The policy knobs on a cluster (docs/kubernetes-policies.md): each
// policy set of the sweep (runner.Spec.PolicyGroups) gets a measuring
// namespace of its own (a measure.Session: server, clients, Service), and
// in it, created through the API, the lab's generated set
// (labpolicy.Generate: N policies selecting the server pod that do not
// match the flow, and the one allowing it). NetworkPolicies are
// namespaced, so every set coexists and the rounds interleave all the
// sets' cells (runner.Execute); the caveat: the other sets' policies are
// in the cluster (and in the enforcer's tables) while one set is measured.
// The host path (hostNetwork pods, which no policy selects) is measured in
// the first set's namespace only. Each cell proves its set in force in its
// proof round (policyProof); a cell without the proof is not applied and
// not measured.

// checkPolicies refuses a policy knob where a cluster run cannot honour
// it, before anything is made.
func (s Spec) checkPolicies() error {
	if !s.Measure.UsesPolicies() {
		return nil
	}
	switch {
	case len(s.Measure.PolicyProviders) > 0:
		return field.Errorf("policy_providers", "{policy_providers} names a lab's policy providers; a cluster's policies are enforced by its own enforcer (kube up --network-policy): leave it out")
	case len(s.Configs) > 0:
		return field.Errorf("sweep", "%s and %s measure one cluster: give {cluster} or {kubeconfig}, not kube.clusters", knob.Policies, knob.IPBlocks)
	case !slices.Contains(s.Pods.Paths, measure.PathPod) && !slices.Contains(s.Pods.Paths, measure.PathService):
		return fmt.Errorf("%s and %s select the server pod: measure the pod or the service path (--paths pod,service)", knob.Policies, knob.IPBlocks)
	}
	return nil
}

// checkEnforcer refuses what (a policy knob, converge's --policy) on local
// cluster name whose enforcer (kube up --network-policy, its facts)
// enforces none.
func checkEnforcer(name, enforcer, what string) error {
	e, err := clusternet.GetEnforcer(enforcer)
	if err != nil {
		return fmt.Errorf("cluster %s: %v", name, err)
	}
	if !e.Enforces {
		return fmt.Errorf("%s: cluster %s enforces no NetworkPolicy (--network-policy %s): bring one up with --network-policy %s or %s",
			what, name, e.Name, clusternet.PolicyVnetlab, clusternet.PolicyKubeRouter)
	}
	return nil
}

// pointSet is one policy set's namespace: what its cells prove.
type pointSet struct {
	sess  *measure.Session
	set   knob.PolicySet
	names []string // the policies created
	took  time.Duration
	// server is the server pod's address per family (the deny probe's).
	server map[family.Family]string
	// nodes: each node's vnetlab enforcer counters (a local cluster's),
	// the server node's read around each proof; none: none is read.
	nodes map[string]nodeCounters
}

// nodeCounters reads a node's vnetlab enforcer: how many packets its
// policies denied and evaluated, over the whole node.
type nodeCounters struct {
	what string // what is read, for the proofs' words
	read func() (denied, evaluated uint64, err error)
}

// enforcerCounters are the counters of local cluster st's nodes where
// vnetlab's enforcer keeps them: the node's table (the nftables backend)
// or its policy plane (the eBPF backend, programs on the pods).
func enforcerCounters(st *lab.State) map[string]nodeCounters {
	out := map[string]nodeCounters{}
	for _, node := range st.Nodes {
		if _, err := polnft.Read(node.NS); err == nil {
			out[node.Name] = nodeCounters{what: "the node's table " + polnft.Table, read: func() (uint64, uint64, error) {
				h, err := polnft.Read(node.NS)
				return h.Denied, h.Evaluated, err
			}}
			continue
		}
		dir := netpolicy.PlaneDir(cluster.ProxyPlane(st.Name, node.Name))
		if !polbpf.Exists(dir) {
			continue
		}
		out[node.Name] = nodeCounters{what: "the node's policy programs (" + dir + ")", read: func() (uint64, uint64, error) {
			p, err := polbpf.Open(dir, polbpf.Frontends{})
			if err != nil {
				return 0, 0, err
			}
			defer p.Close()
			c, err := p.Counters()
			return c.Denied, c.Evaluated(), err
		}}
	}
	return out
}

// enforce creates set in the session's namespace through the API and
// waits until a flow it denies is dropped (up to a minute; the cells'
// proofs judge it anyway).
func enforce(ctx context.Context, sess *measure.Session, set knob.PolicySet, nodes map[string]nodeCounters, say func(string, ...any)) (*pointSet, error) {
	ps := &pointSet{sess: sess, set: set, server: map[family.Family]string{}, nodes: nodes}
	var server netpol.Pod
	var clients, all []netpol.Pod
	for _, ep := range sess.Endpoints {
		if ep.Path == measure.PathHost {
			continue
		}
		for _, name := range []string{ep.ServerPod, ep.ClientPod} {
			if slices.ContainsFunc(all, func(p netpol.Pod) bool { return p.Name == name }) {
				continue
			}
			p, err := sess.Client.CoreV1().Pods(sess.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			np := netpol.Pod{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels}
			for _, ip := range p.Status.PodIPs {
				a, err := netip.ParseAddr(ip.IP)
				if err != nil {
					return nil, fmt.Errorf("pod %s: %v", p.Name, err)
				}
				np.IPs = append(np.IPs, a)
				if name == ep.ServerPod {
					ps.server[family.OfString(ip.IP)] = ip.IP
				}
			}
			all = append(all, np)
			if name == ep.ServerPod {
				server = np
			} else {
				clients = append(clients, np)
			}
		}
	}
	// The denied port listens, so that an enforcer's reject (kube-router's)
	// is told from an empty port's reset.
	if err := sess.Listen(ctx, server.Name, server.IPs[0].String(), labpolicy.DeniedPort); err != nil {
		return nil, err
	}
	v4 := slices.ContainsFunc(server.IPs, netip.Addr.Is4)
	v6 := slices.ContainsFunc(server.IPs, netip.Addr.Is6)
	gen, allow, err := labpolicy.Generate(set.Policies, set.IPBlocks, server, clients, all, v4, v6, labservice.EnginePorts)
	if err != nil {
		return nil, err
	}
	pols := append(gen, allow)
	for _, p := range pols {
		ps.names = append(ps.names, p.Name)
	}
	start := time.Now()
	if ps.took, err = sess.CreatePolicies(ctx, pols, say); err != nil {
		return nil, err
	}
	say("namespace %s: %s: %d NetworkPolicies created in %.2fs", sess.Namespace, setText(set), len(pols), ps.took.Seconds())
	// In force: the deny probe of the first client is denied.
	client, addr := clients[0].Name, ps.deniedAddr(server.IPs[0].String())
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := sess.DialFrom(ctx, client, addr, deniedWait)
		if measure.Denied(got) {
			say("namespace %s: %s in force after %.1fs (tcp %s from %s %s)", sess.Namespace, setText(set), time.Since(start).Seconds(), addr, client, got)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			say("warning: namespace %s: %s not in force after a minute (tcp %s from %s: %s %v): its cells will say why", sess.Namespace, setText(set), addr, client, got, err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return ps, nil
}

// deniedWait: a denied connection's SYN may be dropped, so a dial waits this long.
const deniedWait = time.Second

func (ps *pointSet) deniedAddr(ip string) string {
	return net.JoinHostPort(ip, strconv.Itoa(labpolicy.DeniedPort))
}

func setText(set knob.PolicySet) string {
	if t := set.String(); t != "" {
		return t
	}
	return "policies=0"
}

// prove gives each planned cell of the set's namespace its proof.
func (ps *pointSet) prove(planned []runner.Planned) {
	for i := range planned {
		c := &planned[i]
		if c.Cell.Path == measure.PathHost {
			continue // no policy selects a hostNetwork pod
		}
		c.ProvePolicies(ps.set, ps.took.Seconds(), &policyProof{ps: ps, client: c.Target.ClientNS, addr: ps.deniedAddr(ps.server[c.Family]), node: ps.nodes[c.Cell.ServerNode]})
	}
}

// policyProof is a cluster cell's runner.PolicyProver: Begin reads the
// namespace's policies back through the API and counts them against the
// set created, then dials, from the cell's client pod, the server pod's
// DeniedPort, which the set denies and where the server pod listens
// (measure.Session.Listen), and wants it denied: dropped, or refused (an
// enforcer's reject; an allowed dial connects); the proof sample
// succeeding shows the measured flow answered. Where the server node's
// vnetlab enforcer has counters (node), its denied count must grow over the
// probe and its evaluated count over the proof sample.
type policyProof struct {
	ps           *pointSet
	client, addr string
	node         nodeCounters

	objects, want     int
	probe             string
	denied, evaluated uint64
	// probedEvaluated is the node's evaluated count after the probe.
	probedEvaluated uint64
}

func (p *policyProof) Begin() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names, err := p.ps.sess.PolicyNames(ctx)
	if err != nil {
		return "reading the NetworkPolicies back: " + err.Error()
	}
	p.want = len(p.ps.names)
	p.objects = 0
	for _, n := range names {
		if slices.Contains(p.ps.names, n) {
			p.objects++
		}
	}
	if p.objects != p.want {
		return fmt.Sprintf("namespace %s holds %d of the %d NetworkPolicies created", p.ps.sess.Namespace, p.objects, p.want)
	}
	var deniedBefore uint64
	if p.node.read != nil {
		if deniedBefore, _, err = p.node.read(); err != nil {
			return err.Error()
		}
	}
	got, err := p.ps.sess.DialFrom(ctx, p.client, p.addr, deniedWait)
	p.probe = "tcp " + p.addr + " from " + p.client + ": " + got
	if !measure.Denied(got) {
		return fmt.Sprintf("a connection the policies deny (%s) was not denied: %s %v", p.probe, got, err)
	}
	if p.node.read == nil {
		return ""
	}
	denied, evaluated, err := p.node.read()
	if err != nil {
		return err.Error()
	}
	p.denied, p.probedEvaluated = denied-deniedBefore, evaluated
	if p.denied == 0 {
		return fmt.Sprintf("a connection the policies deny (%s) was denied, but not by %s (its denied count stayed %d)", p.addr, p.node.what, deniedBefore)
	}
	return ""
}

func (p *policyProof) End() string {
	if p.node.read == nil {
		return ""
	}
	_, evaluated, err := p.node.read()
	if err != nil {
		return err.Error()
	}
	p.evaluated = evaluated - p.probedEvaluated
	if p.evaluated == 0 {
		return fmt.Sprintf("%s evaluated none of the proof sample's packets (its evaluated count stayed %d)", p.node.what, evaluated)
	}
	return ""
}

func (p *policyProof) Seen() labpolicy.CellSeen {
	return labpolicy.CellSeen{Objects: p.objects, Want: p.want, Probe: p.probe, ProbeDenied: p.denied, Evaluated: p.evaluated}
}
