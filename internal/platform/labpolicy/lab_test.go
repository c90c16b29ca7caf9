package labpolicy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Real labs (names start with "np"), real kernel filtering, real sockets:
// for each set of policies, every pod tries every other pod on TCP and UDP
// at each served port, and the connections that happened must be exactly
// those the model's reference (netpol.World.Allowed) allows.

// servedPorts: each pod serves TCP and UDP (echo) on these.
var servedPorts = []int{8080, 8081, 5353}

// probeWait is how long a probe waits for an answer before it calls the
// connection dropped: seconds, as the tests' blocking calls do.
const probeWait = 3 * time.Second

// pods is the cluster the policies see: two namespaces, four pods.
const pods = `
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: web}}
---
apiVersion: v1
kind: Namespace
metadata: {name: tools, labels: {team: ops}}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-a, namespace: shop, labels: {app: web}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8080}, {name: dns, containerPort: 5353, protocol: UDP}]}]}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-b, namespace: shop, labels: {app: client}}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-c, namespace: tools, labels: {app: client}}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-d, namespace: tools, labels: {app: db}}
spec: {containers: [{name: c, ports: [{name: http, containerPort: 8081}]}]}
`

// policySets are applied in turn to one lab (each an update of the last).
var policySets = []struct{ name, yaml string }{
	{"ingress: namespace default deny, named ports, namespace and pod selectors", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: shop}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {team: ops}}, podSelector: {matchExpressions: [{key: app, operator: In, values: [client]}]}}]
    ports: [{port: http}]
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: UDP, port: dns}]
`},
	{"egress: ipBlock with except, endPort, egress named port; ingress by ipBlock", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c-out, namespace: tools}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 192.168.0.0/16, except: [POD_A/32]}}, {ipBlock: {cidr: "POD_CIDR6", except: ["POD_A6/128"]}}]
    ports: [{port: 8080, endPort: 8081}, {protocol: UDP, port: 5353}]
  - to: [{namespaceSelector: {}}]
    ports: [{port: http}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: d-in, namespace: tools}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{ipBlock: {cidr: POD_B/32}}, {ipBlock: {cidr: "POD_B6/128"}}]}]
`},
	{"deny all in one namespace beside an allow-all of the other", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: all, namespace: tools}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: open, namespace: shop}
spec: {podSelector: {}, ingress: [{}], egress: [{}]}
`},
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed")
	}
}

func TestTruthTableInLabs(t *testing.T) {
	requireRoot(t)
	for _, mode := range []string{modes.VethRouted, modes.Bridge, modes.VethEBPF} {
		m, err := modes.Get(mode)
		if err != nil {
			t.Fatal(err)
		}
		var providers []string // those that serve the mode (veth-ebpf: ebpf alone)
		for _, name := range Names() {
			if p, _ := Get(name); p.Supports(m, nil) == "" {
				providers = append(providers, name)
			}
		}
		t.Run(mode, func(t *testing.T) {
			l, _ := testnet.UpLab(t, lab.Spec{Name: "np-" + strings.ReplaceAll(mode, "-", ""), Mode: mode, PodCIDR: lab.DefaultPodCIDR, PodCIDR6: lab.DefaultPodCIDR6, Family: family.Dual}, 4)
			l.Release()
			st := l.State
			for _, p := range st.Pods {
				for _, port := range servedPorts {
					testnet.Serve(t, p.NS, port, "")
					testnet.Serve6(t, p.NS, port, "")
				}
			}
			for _, provider := range providers {
				t.Run(provider, func(t *testing.T) { truthTables(t, st, provider) })
			}
		})
	}
}

// truthTables applies the policy sets in turn with provider and checks
// each truth table, then removes the provider's objects.
func truthTables(t *testing.T, st *lab.State, provider string) {
	c := &Config{Provider: provider}
	doc, err := netpol.Parse([]byte(pods))
	if err != nil {
		t.Fatal(err)
	}
	c.Merge(doc)
	var old *Config
	for _, set := range policySets {
		text := strings.NewReplacer("POD_A6", st.Pods[0].IP6, "POD_B6", st.Pods[1].IP6, "POD_CIDR6", st.Spec.PodCIDR6,
			"POD_A", st.Pods[0].IP, "POD_B", st.Pods[1].IP).Replace(set.yaml)
		doc, err := netpol.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		next := c.Clone()
		next.Policies = doc.Policies
		if err := Commit(st, old, next); err != nil {
			t.Fatalf("%s: %v", set.name, err)
		}
		old, c = next.Clone(), next
		inNodesOnly(t, st, provider, true)
		forgetFlows(t, st)
		w, err := c.World(st)
		if err != nil {
			t.Fatal(err)
		}
		denied, allowed := checkTruthTable(t, set.name, st, w, connects)
		if denied == 0 || allowed == 0 {
			t.Errorf("%s: %d allowed and %d denied: a truth table needs both", set.name, allowed, denied)
		}
	}
	// The earlier sets again, in reverse, reached one policy at a time
	// through the lab's transaction, as `policy del` and `policy add` do:
	// each change writes only the pods it changed, and the truth tables
	// must hold as before. One set goes through a session per change, the
	// other through one session held for all of them (its writer kept).
	for i := len(policySets) - 2; i >= 0; i-- {
		set := policySets[i]
		text := strings.NewReplacer("POD_A6", st.Pods[0].IP6, "POD_B6", st.Pods[1].IP6, "POD_CIDR6", st.Spec.PodCIDR6,
			"POD_A", st.Pods[0].IP, "POD_B", st.Pods[1].IP).Replace(set.yaml)
		doc, err := netpol.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		add := func(p networkingv1.NetworkPolicy) error {
			_, err := Add(st.Name, netpol.Doc{Policies: []networkingv1.NetworkPolicy{p}}, "")
			return err
		}
		del := func(ns, name string) error { _, err := Del(st.Name, ns, name); return err }
		held := i%2 == 0
		done := func() {}
		if held {
			s, err := OpenSession(st.Name)
			if err != nil {
				t.Fatal(err)
			}
			done = func() {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			add = func(p networkingv1.NetworkPolicy) error {
				_, err := s.Add(netpol.Doc{Policies: []networkingv1.NetworkPolicy{p}}, "")
				return err
			}
			del = func(ns, name string) error { _, err := s.Del(ns, name); return err }
		}
		for _, p := range c.Policies {
			if !slices.ContainsFunc(doc.Policies, func(q networkingv1.NetworkPolicy) bool { return netpol.PolicyKey(&q) == netpol.PolicyKey(&p) }) {
				if err := del(p.Namespace, p.Name); err != nil {
					t.Fatalf("%s, one change at a time (held session %v): deleting %s: %v", set.name, held, netpol.PolicyKey(&p), err)
				}
			}
		}
		for _, p := range doc.Policies {
			if err := add(p); err != nil {
				t.Fatalf("%s, one change at a time (held session %v): adding %s: %v", set.name, held, netpol.PolicyKey(&p), err)
			}
		}
		done()
		if c, err = Load(st.Name); err != nil {
			t.Fatal(err)
		}
		if len(c.Policies) != len(doc.Policies) {
			t.Fatalf("%s, one change at a time: the lab has %d policies, want %d", set.name, len(c.Policies), len(doc.Policies))
		}
		p, _ := Get(provider)
		if pr, err := p.Prove(st); err != nil || pr.Objects != pr.Want || pr.Want == 0 {
			t.Fatalf("%s, one change at a time: the provider holds %d objects, the compiled rules make %d (%v)", set.name, pr.Objects, pr.Want, err)
		}
		inNodesOnly(t, st, provider, true)
		forgetFlows(t, st)
		w, err := c.World(st)
		if err != nil {
			t.Fatal(err)
		}
		checkTruthTable(t, set.name+", one change at a time", st, w, connects)
	}
	if err := Remove(st, c); err != nil {
		t.Fatal(err)
	}
	inNodesOnly(t, st, provider, false)
}

// forgetFlows empties the nodes' conntrack tables: a truth table asks
// which new flows the policies allow, and a flow an earlier set allowed
// stays allowed (established flows outlive a change, by design). A UDP
// probe whose ephemeral port happened to be an earlier set's probe's, to
// the same address and port, was that flow (seen once: a denied probe
// "connected" in the suite).
func forgetFlows(t *testing.T, st *lab.State) {
	t.Helper()
	if err := st.EachNode(func(ns string) error {
		return nsutil.Do(ns, func() error { return netlink.ConntrackTableFlush(netlink.ConntrackTable) })
	}); err != nil {
		t.Fatalf("flushing the nodes' conntrack: %v", err)
	}
}

// providerObjects checks where a provider's objects are: in every node
// (every pod's interface for ebpf) while policies are loaded, nowhere after
// Remove, and never in the test's own (root) namespace.
var providerObjects = map[string]func(t *testing.T, st *lab.State, want bool){
	NFTables: nodeObjects([]string{"nft", "list", "tables"}, NftTable),
	IPTables: nodeObjects([]string{"sh", "-c", "iptables-save -t filter; ip6tables-save -t filter; ipset list -n"}, iptChain, ipsetPrefix),
	EBPF:     podPrograms,
}

// inNodesOnly runs the provider's providerObjects check.
func inNodesOnly(t *testing.T, st *lab.State, provider string, want bool) {
	t.Helper()
	check, ok := providerObjects[provider]
	if !ok {
		t.Fatalf("provider %s: the test does not know how to list its objects (providerObjects)", provider)
	}
	check(t, st, want)
}

// nodeObjects: a command listing the provider's objects in a namespace, and
// the names that show they are there (the first whenever policies are
// loaded, none after Remove).
func nodeObjects(list []string, marks ...string) func(t *testing.T, st *lab.State, want bool) {
	return func(t *testing.T, st *lab.State, want bool) {
		t.Helper()
		for _, n := range st.Nodes {
			out := testnet.IPNetns(t, append([]string{"exec", n.NS}, list...)...)
			if want && !strings.Contains(out, marks[0]) {
				t.Fatalf("node %s has no %s:\n%s", n.NS, marks[0], out)
			}
			for _, m := range marks {
				if !want && strings.Contains(out, m) {
					t.Fatalf("node %s still holds %s after Remove:\n%s", n.NS, m, out)
				}
			}
		}
		out, err := exec.Command(list[0], list[1:]...).Output()
		for _, m := range marks {
			if err != nil || strings.Contains(string(out), m) {
				t.Fatalf("the test's own namespace holds %s (or listing failed: %v)", m, err)
			}
		}
	}
}

// podPrograms: the ebpf provider's two programs on every pod's interface,
// its maps pinned in the lab's directory (and both gone after Remove); no
// interface of the test's own namespace carries them.
func podPrograms(t *testing.T, st *lab.State, want bool) {
	t.Helper()
	for _, p := range st.Pods {
		names, err := polbpf.Programs(polbpf.Interface{NS: p.NS, Ifname: p.Ifname})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names {
			if polbpf.Ours(name) {
				n++
			}
		}
		if want && n != 2 || !want && n != 0 {
			t.Fatalf("pod %s's %s carries %v: want the two policy programs %v", p.Name, p.Ifname, names, want)
		}
	}
	if polbpf.Exists(ebpfDir(st)) != want {
		t.Fatalf("policy maps pinned in %s: %v, want %v", ebpfDir(st), !want, want)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		names, err := polbpf.Programs(polbpf.Interface{Ifname: l.Attrs().Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if polbpf.Ours(name) {
				t.Fatalf("the test's own %s carries %s", l.Attrs().Name, name)
			}
		}
	}
}

// checkTruthTable probes every ordered pair of pods, each protocol and
// served port, at once, with connect (connects, or an enforcer's variant),
// and compares what got through with w's reference.
func checkTruthTable(t *testing.T, name string, st *lab.State, w *netpol.World, connect func(ns, ip string, proto netpol.Proto, port int) (bool, error)) (denied, allowed int) {
	t.Helper()
	type probe struct {
		src, dst lab.PodState
		dstIP    string // the destination's address of the probe's family
		srcIP    string
		proto    netpol.Proto
		port     int
		got      bool
		err      error
	}
	var probes []*probe
	for _, s := range st.Pods {
		for _, d := range st.Pods {
			if s.Name == d.Name {
				continue
			}
			for _, ips := range [][2]string{{s.IP, d.IP}, {s.IP6, d.IP6}} {
				if ips[0] == "" { // a family the lab's pods do not have
					continue
				}
				for _, proto := range []netpol.Proto{netpol.TCP, netpol.UDP} {
					for _, port := range servedPorts {
						probes = append(probes, &probe{src: s, dst: d, srcIP: ips[0], dstIP: ips[1], proto: proto, port: port})
					}
				}
			}
		}
	}
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.got, p.err = connect(p.src.NS, p.dstIP, p.proto, p.port)
		}()
	}
	wg.Wait()
	for _, p := range probes {
		want := w.Allowed(netip.MustParseAddr(p.srcIP), netip.MustParseAddr(p.dstIP), p.proto, uint16(p.port))
		if want {
			allowed++
		} else {
			denied++
		}
		if p.err != nil {
			t.Errorf("%s: %s -> %s (%s) %s/%d: %v", name, p.src.Name, p.dst.Name, p.dstIP, p.proto, p.port, p.err)
			continue
		}
		if p.got != want {
			t.Errorf("%s: %s -> %s (%s) %s/%d: connected %v, the model says %v", name, p.src.Name, p.dst.Name, p.dstIP, p.proto, p.port, p.got, want)
		}
	}
	return denied, allowed
}

// connects says whether a connection from namespace ns to ip:port on proto
// was answered (an echo came back) within probeWait; an error is anything
// else than an answer or silence (a refused port means a missing server).
func connects(ns, ip string, proto netpol.Proto, port int) (bool, error) {
	var ok bool
	addr := net.JoinHostPort(ip, fmt.Sprint(port))
	err := nsutil.Do(ns, func() error {
		if proto == netpol.TCP {
			c, err := net.DialTimeout("tcp", addr, probeWait)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return nil
				}
				return err
			}
			defer c.Close()
			ok = echoes(c, 1)
			if !ok {
				return fmt.Errorf("connected but no echo")
			}
			return nil
		}
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		ok = echoes(c, 3)
		return nil
	})
	return ok, err
}

// echoes sends a line up to tries times, waiting for it to come back.
func echoes(c net.Conn, tries int) bool {
	msg := []byte("probe\n")
	buf := make([]byte, len(msg))
	for i := 0; i < tries; i++ {
		_ = c.SetDeadline(time.Now().Add(probeWait / time.Duration(tries)))
		if _, err := c.Write(msg); err != nil {
			continue
		}
		if _, err := io.ReadFull(c, buf); err == nil && string(buf) == string(msg) {
			return true
		}
	}
	return false
}
