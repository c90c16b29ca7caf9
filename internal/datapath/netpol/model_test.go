package netpol

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// The cases follow the behaviours upstream's test/e2e/network/netpol
// checks, on the same kind of world: namespaces x, y and z (labelled
// ns=NAME), each with pods a, b and c (labelled pod=NAME) that have the
// named ports serve-80-tcp, serve-81-tcp, serve-80-udp and serve-81-udp,
// plus addresses that are no pod. Each case's expectation is written by
// hand, as a function of the two ends; the test holds the reference
// (World.Allowed) and the compiled rules (Rules.Allowed) to it for every
// pair of ends, both protocols, ports 80, 81 and 82, on IPv4 and IPv6.

// end is one end of a connection: a pod (ns/pod) or an address of no pod.
type end struct {
	ns, pod string
	ip      netip.Addr
}

func (e end) String() string {
	if e.pod == "" {
		return e.ip.String()
	}
	return e.ns + "/" + e.pod
}

var (
	nsNames  = []string{"x", "y", "z"}
	podNames = []string{"a", "b", "c"}
)

// testWorld is the e2e-like world with the policies of yamlText, and its
// ends of family 4 or 6.
func testWorld(t *testing.T, yamlText string, fam int) (*World, []end) {
	t.Helper()
	w := &World{}
	var ends []end
	for i, ns := range nsNames {
		w.Namespaces = append(w.Namespaces, Namespace{Name: ns, Labels: Labels{"ns": ns}})
		for j, pn := range podNames {
			v4 := netip.AddrFrom4([4]byte{10, 0, byte(i + 1), byte(j + 1)})
			v6 := netip.MustParseAddr(fmt.Sprintf("fd00::%d:%d", i+1, j+1))
			w.Pods = append(w.Pods, Pod{Name: pn, Namespace: ns, Labels: Labels{"pod": pn}, IPs: []netip.Addr{v4, v6},
				Ports: []NamedPort{{"serve-80-tcp", TCP, 80}, {"serve-81-tcp", TCP, 81}, {"serve-80-udp", UDP, 80}, {"serve-81-udp", UDP, 81}}})
			ip := v4
			if fam == 6 {
				ip = v6
			}
			ends = append(ends, end{ns, pn, ip})
		}
	}
	outside := []string{"10.0.9.9", "192.168.9.9"}
	if fam == 6 {
		outside = []string{"fd00::9:9", "fd09::9"}
	}
	for _, o := range outside {
		ends = append(ends, end{ip: netip.MustParseAddr(o)})
	}
	doc, err := Parse([]byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	w.Policies = doc.Policies
	if err := Check(w); err != nil {
		t.Fatal(err)
	}
	return w, ends
}

type truth func(s, d end, p Proto, port uint16) bool

func all(end, end, Proto, uint16) bool { return true }

// notInto: everything except what reaches the pods that dst picks.
func notInto(dst func(end) bool) truth {
	return func(s, d end, p Proto, port uint16) bool { return !dst(d) }
}

func pod(ns, name string) func(end) bool {
	return func(e end) bool { return e.ns == ns && e.pod == name }
}
func inNS(ns string) func(end) bool { return func(e end) bool { return e.ns == ns } }

const (
	denyIngressX = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-ingress, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Ingress]
`
	denyAllX = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: x}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
`
)

// xa is the usual server of the cases: pod a of namespace x.
var xa = pod("x", "a")

var cases = []struct {
	name string
	yaml string
	want truth
}{
	{"no policy allows everything", "", all},
	{"default deny ingress isolates a namespace's pods", denyIngressX, notInto(inNS("x"))},
	{"default deny all: nothing in or out of x", denyAllX, func(s, d end, p Proto, port uint16) bool { return s.ns != "x" && d.ns != "x" }},
	{"podSelector of the same namespace", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "x" && s.pod == "b" }},
	{"empty podSelector peer: every pod of the policy's namespace", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-x, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "x" }},
	{"namespaceSelector matchLabels", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "y" }},
	{"namespaceSelector on the default name label", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-z, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: z}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "z" }},
	{"empty namespaceSelector: pods of every namespace, no other address", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-pods, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.pod != "" }},
	{"podSelector AND namespaceSelector in one peer", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: and, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}, podSelector: {matchLabels: {pod: b}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "y" && s.pod == "b" }},
	{"podSelector OR namespaceSelector as two peers", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: or, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}}, {podSelector: {matchLabels: {pod: b}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "y" || s.ns == "x" && s.pod == "b" }},
	{"matchExpressions In and NotIn", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: exprs, namespace: x}
spec:
  podSelector: {matchExpressions: [{key: pod, operator: In, values: [a, b]}]}
  ingress:
  - from:
    - namespaceSelector: {matchExpressions: [{key: ns, operator: NotIn, values: ["y"]}]}
      podSelector: {matchExpressions: [{key: pod, operator: NotIn, values: [c]}]}
`, func(s, d end, p Proto, port uint16) bool {
		return d.ns != "x" || d.pod == "c" || d.pod == "" || s.pod != "" && s.ns != "y" && s.pod != "c"
	}},
	{"matchExpressions Exists and DoesNotExist", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: exists, namespace: x}
spec:
  podSelector: {matchExpressions: [{key: pod, operator: Exists}]}
  ingress:
  - from:
    - namespaceSelector: {matchExpressions: [{key: ns, operator: Exists}, {key: team, operator: DoesNotExist}]}
      podSelector: {matchExpressions: [{key: role, operator: DoesNotExist}]}
`, func(s, d end, p Proto, port uint16) bool { return d.ns != "x" || s.pod != "" }},
	{"a selector on a missing label selects nothing: default deny", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: nobody, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchExpressions: [{key: role, operator: Exists}]}}]}]
`, notInto(xa)},
	{"a policy selects only pods of its own namespace", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: "y"}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
`, notInto(pod("y", "a"))},
	{"port 80 only, TCP by default", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: port80, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: 80}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == TCP && port == 80 }},
	{"UDP only: TCP on the same port denied", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: udp81, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: UDP, port: 81}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == UDP && port == 81 }},
	{"a protocol without a port: every port of it", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: any-udp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: UDP}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == UDP }},
	{"SCTP only is not TCP: the pod is isolated and TCP/UDP denied", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sctp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: SCTP, port: 80}]}]
`, notInto(xa)},
	{"endPort: a range of ports", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: range, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: 80, endPort: 81}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == TCP && (port == 80 || port == 81) }},
	{"ingress on one named port", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{port: serve-81-tcp}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == TCP && port == 81 }},
	{"a named port is looked up with its protocol", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-udp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: UDP, port: serve-80-udp}], from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) || s.ns == "y" && p == UDP && port == 80 }},
	{"egress on one named port: the destination's", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: named-egress, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{ports: [{port: serve-80-tcp}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(s) || d.pod != "" && p == TCP && port == 80 }},
	{"deny egress from a pod", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-egress, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
`, func(s, d end, p Proto, port uint16) bool { return !xa(s) }},
	{"egress rules without policyTypes govern egress (and ingress)", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-y, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  egress: [{to: [{namespaceSelector: {matchLabels: {ns: "y"}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(d) && (!xa(s) || d.ns == "y") }},
	{"policyTypes Egress ignores the policy's ingress rules", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: egress-only, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
  egress: [{to: [{podSelector: {matchLabels: {pod: b}}}]}]
`, func(s, d end, p Proto, port uint16) bool { return !xa(s) || d.ns == "x" && d.pod == "b" }},
	{"client-side egress deny wins over the server's allow", denyAllX + `---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all-in, namespace: "y"}
spec:
  podSelector: {}
  ingress: [{}]
`, func(s, d end, p Proto, port uint16) bool { return s.ns != "x" && d.ns != "x" }},
	{"stacked policies add up", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}], ports: [{port: 80}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-y, namespace: x}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: "y"}}}], ports: [{port: 81}]}]
`, func(s, d end, p Proto, port uint16) bool {
		if d.ns != "x" {
			return true
		}
		return p == TCP && (port == 81 && s.ns == "y" || port == 80 && xa(d) && s.ns == "x" && s.pod == "b")
	}},
	{"an allow-all ingress policy takes precedence over a deny", denyIngressX + `---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all, namespace: x}
spec:
  podSelector: {}
  ingress: [{}]
`, all},
	{"an allow-all egress policy takes precedence over a narrow one", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: narrow, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  egress: [{to: [{podSelector: {matchLabels: {pod: b}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: wide, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{}]
`, notInto(xa)},
	{"ingress and egress controlled independently", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: both, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress, Egress]
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
  egress: [{to: [{podSelector: {matchLabels: {pod: c}}}]}]
`, func(s, d end, p Proto, port uint16) bool {
		if xa(s) {
			return d.ns == "x" && d.pod == "c"
		}
		return !xa(d) || s.ns == "x" && s.pod == "b"
	}},
	{"ipBlock ingress with except", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: block, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.2.0/24]}}, {ipBlock: {cidr: "fd00::/96", except: ["fd00::2:0/112"]}}]}]
`, func(s, d end, p Proto, port uint16) bool {
		if !xa(d) {
			return true
		}
		in4 := netip.MustParsePrefix("10.0.0.0/16").Contains(s.ip) && !netip.MustParsePrefix("10.0.2.0/24").Contains(s.ip)
		in6 := netip.MustParsePrefix("fd00::/96").Contains(s.ip) && !netip.MustParsePrefix("fd00::2:0/112").Contains(s.ip)
		return in4 || in6
	}},
	{"ipBlock egress to one pod's address, with an except of it in another block", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 10.0.2.2/32}}, {ipBlock: {cidr: "fd00::2:2/128"}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: not-yb, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress: [{to: [{ipBlock: {cidr: 10.0.2.0/24, except: [10.0.2.2/32]}}]}]
`, func(s, d end, p Proto, port uint16) bool {
		return !xa(s) || d.ns == "y" && d.pod == "b" || netip.MustParsePrefix("10.0.2.0/24").Contains(d.ip)
	}},
	{"ipBlock for the world outside the pods, named-port egress to pods", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: out, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress:
  - to: [{ipBlock: {cidr: 192.168.0.0/16}}, {ipBlock: {cidr: "fd09::/16"}}]
    ports: [{protocol: UDP, port: 82}]
  - to: [{namespaceSelector: {matchLabels: {ns: z}}}]
    ports: [{port: serve-81-tcp}]
`, func(s, d end, p Proto, port uint16) bool {
		if !xa(s) {
			return true
		}
		outside := d.pod == "" && !strings.HasPrefix(d.ip.String(), "10.0.") && !strings.HasPrefix(d.ip.String(), "fd00:")
		return outside && p == UDP && port == 82 || d.ns == "z" && p == TCP && port == 81
	}},
}

func TestTruthTables(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, fam := range []int{4, 6} {
				w, ends := testWorld(t, c.yaml, fam)
				checkTable(t, fmt.Sprintf("IPv%d ", fam), w, ends, c.want)
			}
		})
	}
}

// checkTable holds the reference and the compiled rules of w to want for
// every pair of ends (one of them a pod), TCP and UDP, ports 80, 81, 82.
func checkTable(t *testing.T, prefix string, w *World, ends []end, want truth) {
	t.Helper()
	rules := Compile(w)
	for _, s := range ends {
		for _, d := range ends {
			if s == d || s.pod == "" && d.pod == "" {
				continue
			}
			for _, p := range []Proto{TCP, UDP} {
				for _, port := range []uint16{80, 81, 82} {
					want := want(s, d, p, port)
					if got := w.Allowed(s.ip, d.ip, p, port); got != want {
						t.Errorf("%s%s -> %s %s/%d: reference says %v, want %v", prefix, s, d, p, port, got, want)
					}
					if got := rules.Allowed(s.ip, d.ip, p, port); got != want {
						t.Errorf("%s%s -> %s %s/%d: compiled rules say %v, want %v", prefix, s, d, p, port, got, want)
					}
				}
			}
		}
	}
}

func TestSelfAlwaysAllowed(t *testing.T) {
	w, ends := testWorld(t, denyAllX, 4)
	r := Compile(w)
	if !w.Allowed(ends[0].ip, ends[0].ip, TCP, 80) || !r.Allowed(ends[0].ip, ends[0].ip, TCP, 80) {
		t.Fatal("a pod reaching its own address was denied")
	}
}

func TestCompiledShape(t *testing.T) {
	w, _ := testWorld(t, `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}, {ipBlock: {cidr: 10.1.0.0/16, except: [10.1.1.0/24]}}]
    ports: [{port: serve-81-tcp}, {protocol: UDP, port: 1000, endPort: 2000}]
`, 4)
	r := Compile(w)
	xa := r.Pods[0]
	if xa.Namespace != "x" || xa.Pod != "a" || !xa.Ingress.Isolated || xa.Egress.Isolated || len(xa.Ingress.Allow) != 1 {
		t.Fatalf("x/a compiled to %+v", xa)
	}
	a := xa.Ingress.Allow[0]
	wantPods := []netip.Addr{netip.MustParseAddr("10.0.1.2"), netip.MustParseAddr("fd00::1:2")}
	if fmt.Sprint(a.Pods) != fmt.Sprint(wantPods) || len(a.Blocks) != 1 || a.Blocks[0].CIDR.String() != "10.1.0.0/16" || fmt.Sprint(a.Blocks[0].Except) != "[10.1.1.0/24]" {
		t.Errorf("peers compiled to %+v", a)
	}
	if fmt.Sprint(a.Ports) != "[{TCP 81 81} {UDP 1000 2000}]" || a.AnyPort || a.AnyPeer {
		t.Errorf("ports compiled to %+v", a.Ports)
	}
	if got := r.Isolated(false); len(got) != 2 {
		t.Errorf("isolated for ingress: %v, want x/a's two addresses", got)
	}
}

func TestNormalised(t *testing.T) {
	got := mergePorts([]PortRange{{UDP, 1500, 2500}, {TCP, 80, 80}, {UDP, 1000, 2000}, {TCP, 81, 90}, {UDP, 1800, 1800}, {TCP, 0, 65535}, {UDP, 3000, 3000}})
	if fmt.Sprint(got) != "[{TCP 0 65535} {UDP 1000 2500} {UDP 3000 3000}]" {
		t.Errorf("merged ports: %v", got)
	}
	ex := outermost([]netip.Prefix{netip.MustParsePrefix("10.0.2.0/25"), netip.MustParsePrefix("10.0.3.0/24"), netip.MustParsePrefix("10.0.2.0/24"), netip.MustParsePrefix("10.0.2.0/24")})
	if fmt.Sprint(ex) != "[10.0.2.0/24 10.0.3.0/24]" {
		t.Errorf("outermost excepts: %v", ex)
	}
}

func TestBadInput(t *testing.T) {
	const head = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n"
	for _, c := range []struct{ yaml, want string }{
		{"  ingress: [{from: [{podSelector: {matchExpressions: [{key: pod, operator: Near, values: [a]}]}}]}]\n", `spec.ingress[0].from[0].podSelector: "Near" is not a valid label selector operator`},
		{"  ingress: [{from: [{podSelector: {matchExpressions: [{key: pod, operator: In}]}}]}]\n", "spec.ingress[0].from[0].podSelector: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"},
		{"  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/33}}]}]\n", `spec.ingress[0].from[0].ipBlock.cidr "10.0.0.0/33" is not a CIDR`},
		{"  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}}]}]\n", "except[0] 10.1.0.0/24 is outside its cidr 10.0.0.0/16"},
		{"  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.0.0/16]}}]}]\n", "except[0] 10.0.0.0/16 is outside its cidr"},
		{"  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/16}, podSelector: {}}]}]\n", "spec.egress[0].to[0]: ipBlock goes alone"},
		{"  egress: [{to: [{}]}]\n", "spec.egress[0].to[0] is empty"},
		{"  ingress: [{ports: [{port: 90, endPort: 80}]}]\n", "spec.ingress[0].ports[0].endPort 80 is below port 90"},
		{"  ingress: [{ports: [{port: serve-80-tcp, endPort: 90}]}]\n", "endPort needs a numeric port"},
		{"  ingress: [{ports: [{port: web}]}]\n", `no pod has a TCP port named "web" (pods' named ports: serve-80-tcp/TCP`},
		{"  ingress: [{ports: [{port: serve-80-udp}]}]\n", `no pod has a TCP port named "serve-80-udp"`},
		{"  ingress: [{ports: [{protocol: ICMP}]}]\n", `unknown protocol "ICMP"`},
		{"  policyTypes: [Inbound]\n", `spec.policyTypes[0] "Inbound": use Ingress or Egress`},
		{"  ingress: [{ports: [{port: 0}]}]\n", "port 0: a port is 1-65535"},
	} {
		_, err := func() (*World, error) {
			w, _ := testWorld(t, "", 4)
			doc, err := Parse([]byte(head + c.yaml))
			if err != nil {
				return nil, err
			}
			w.Policies = doc.Policies
			return w, Check(w)
		}()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", strings.TrimSpace(c.yaml), err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "policy x/p: ") {
			t.Errorf("error is not one line naming the policy: %q", err)
		}
	}
}

// shopPod is a policy file's first documents: a namespace with labels and
// a pod in it with named ports (TCP, UDP) and an unnamed one; a test adds
// its policies after it.
const shopPod = `
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-a, namespace: shop, labels: {app: db}}
spec:
  containers:
  - name: c
    ports: [{name: pg, containerPort: 5432}, {name: dns, containerPort: 53, protocol: UDP}, {containerPort: 9}]
---
`

func TestParse(t *testing.T) {
	doc, err := Parse([]byte(shopPod + `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p}
spec: {podSelector: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Namespaces) != 1 || doc.Namespaces[0].Labels["team"] != "web" {
		t.Errorf("namespaces: %+v", doc.Namespaces)
	}
	if len(doc.Pods) != 1 || fmt.Sprint(doc.Pods[0].Ports) != "[{pg TCP 5432} {dns UDP 53}]" || doc.Pods[0].Namespace != "shop" {
		t.Errorf("pods: %+v", doc.Pods)
	}
	if len(doc.Policies) != 1 || doc.Policies[0].Namespace != DefaultNamespace {
		t.Errorf("policies: %+v", doc.Policies)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", `kind "Service": a policy file holds`},
		{"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {podSelectr: {}}\n", `unknown field "podSelectr"`},
		{"apiVersion: extensions/v1beta1\nkind: NetworkPolicy\nmetadata: {name: p}\n", `apiVersion "extensions/v1beta1": use networking.k8s.io/v1`},
	} {
		if _, err := Parse([]byte(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: got %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

// An enforcer that cannot match a protocol takes its ports out of a policy
// (WithoutProto): as upstream's "should not mistakenly treat 'protocol:
// SCTP' as 'protocol: TCP'" and "should properly isolate pods that are
// selected by a policy allowing SCTP" expect, the pod stays isolated and a
// rule that named only SCTP ports allows nothing, not every port; a rule's
// other ports stay; an egress rule left with no port still makes the policy
// govern egress; a policy naming no SCTP is returned as it is.
func TestWithoutProto(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		fields     []string
		want       truth
	}{
		{"an SCTP-only rule allows nothing and isolates", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sctp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: SCTP, port: 80}]}]
`, []string{"spec.ingress[0].ports[0]"}, notInto(xa)},
		{"the rule's other ports stay", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sctp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{ports: [{protocol: SCTP, port: 80}, {protocol: TCP, port: 81}]}]
`, []string{"spec.ingress[0].ports[0]"}, func(s, d end, p Proto, port uint16) bool { return !xa(d) || p == TCP && port == 81 }},
		{"egress of SCTP only: the policy still governs egress", `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sctp, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  egress: [{ports: [{protocol: SCTP}]}]
`, []string{"spec.egress[0].ports[0]"}, func(s, d end, p Proto, port uint16) bool { return !xa(d) && !xa(s) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, ends := testWorld(t, c.yaml, 4)
			q, fields := WithoutProto(&w.Policies[0], SCTP)
			if fmt.Sprint(fields) != fmt.Sprint(c.fields) {
				t.Errorf("fields %v, want %v", fields, c.fields)
			}
			w.Policies[0] = *q
			checkTable(t, "", w, ends, c.want)
		})
	}
	w, _ := testWorld(t, denyAllX, 4)
	if q, fields := WithoutProto(&w.Policies[0], SCTP); q != &w.Policies[0] || fields != nil {
		t.Errorf("a policy without SCTP came back changed (%v)", fields)
	}
}
