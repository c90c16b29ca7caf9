package cluster

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// throughServices runs the changes that move a pod into or out of a policy
// (a pod's labels, a namespace's labels, a policy's selector, ports and
// peers, a policy deleted), each probed through the pods' ClusterIP
// Services beside their pod IPs, and a pod reaching itself through its own
// Service (hairpin) under policies that isolate it: ingress on named and
// numbered ports, TCP and UDP, and egress. A pod's traffic to itself is
// always allowed (netpol.World.Allowed; kube-proxy's masqueraded hairpin
// reaches an enforcer as the pod's own), whatever the policies. Required of
// vnetlab's enforcers; kube-router, the peer, has its outcomes logged.
// Every subtest deletes the policies it made.
func throughServices(t *testing.T, w *policyWorld, spec Spec) {
	peer := spec.NetworkPolicy != clusternet.PolicyVnetlab
	for _, name := range []string{"srv1", "srv2", "cli", "cli2"} {
		w.svcVIP(name)
	}
	// np-c is team c again (the label subtest above moved it to team b).
	w.label("", "np-c", `{"metadata":{"labels":{"team":"c"}}}`)
	check := func(t *testing.T, probes ...probe) {
		t.Helper()
		if !peer {
			w.expect(t, probes...)
			return
		}
		w.report(t, spec.NetworkPolicy, "the peer: reported, not required", probes)
	}
	svc := func(from, to, proto string, port int, want bool) probe {
		return probe{from, proto, net.JoinHostPort(w.vip["via-"+to], fmt.Sprint(port)), to, want}
	}
	pod := func(from, to, proto string, port int, want bool) probe {
		return probe{from, proto, net.JoinHostPort(w.ip[to], fmt.Sprint(port)), to, want}
	}

	t.Run("through Services: a pod's labels updated", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: isolate-labelled}, spec: {podSelector: {matchLabels: {target: isolated}}, policyTypes: [Ingress]}}`)
		defer w.delete("np-a", "isolate-labelled")
		open := []probe{svc("cli", "srv1", "tcp", 80, true), svc("cli2", "srv1", "udp", 80, true), svc("srv2", "srv1", "tcp", 81, true), pod("cli", "srv1", "tcp", 80, true)}
		check(t, append(open, svc("cli", "srv2", "tcp", 80, true))...)
		w.label("np-a", "srv1", `{"metadata":{"labels":{"target":"isolated"}}}`)
		check(t, svc("cli", "srv1", "tcp", 80, false), svc("cli2", "srv1", "udp", 80, false), svc("srv2", "srv1", "tcp", 81, false),
			pod("cli", "srv1", "tcp", 80, false), svc("cli", "srv2", "tcp", 80, true), svc("srv1", "srv1", "tcp", 80, true))
		w.label("np-a", "srv1", `{"metadata":{"labels":{"target":null}}}`)
		check(t, append(open, svc("cli", "srv2", "tcp", 80, true))...)
	})
	t.Run("through Services: a namespace's labels updated", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: from-team-b}, spec: {podSelector: {matchLabels: {app: srv1}}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: b}}}]}]}}`)
		defer w.delete("np-a", "from-team-b")
		check(t, svc("cli", "srv1", "tcp", 80, true), svc("cli2", "srv1", "tcp", 80, false), svc("cli2", "srv1", "udp", 80, false), pod("cli2", "srv1", "tcp", 80, false))
		w.label("", "np-c", `{"metadata":{"labels":{"team":"b"}}}`)
		check(t, svc("cli2", "srv1", "tcp", 80, true), svc("cli2", "srv1", "udp", 80, true), pod("cli2", "srv1", "tcp", 80, true), svc("srv2", "srv1", "tcp", 80, false))
		w.label("", "np-c", `{"metadata":{"labels":{"team":"c"}}}`)
		check(t, svc("cli", "srv1", "tcp", 80, true), svc("cli2", "srv1", "tcp", 80, false), svc("cli2", "srv1", "udp", 80, false), pod("cli2", "srv1", "tcp", 80, false))
	})
	t.Run("through Services: a policy's selector, ports and peers updated", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: moving}, spec: {podSelector: {matchLabels: {app: srv1}}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: b}}}], ports: [{port: 80}]}]}}`)
		check(t, svc("cli", "srv1", "tcp", 80, true), svc("cli", "srv1", "tcp", 81, false), svc("cli2", "srv1", "tcp", 80, false), svc("cli2", "srv2", "tcp", 80, true))
		w.update("np-a", `{metadata: {name: moving}, spec: {podSelector: {matchLabels: {app: srv2}}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: b}}}], ports: [{port: 80}]}]}}`)
		check(t, svc("cli2", "srv1", "tcp", 80, true), svc("cli2", "srv2", "tcp", 80, false), pod("cli2", "srv2", "tcp", 80, false), svc("cli", "srv2", "tcp", 80, true), svc("cli", "srv2", "tcp", 81, false))
		w.update("np-a", `{metadata: {name: moving}, spec: {podSelector: {matchLabels: {app: srv2}}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: b}}}], ports: [{port: serve-81}]}]}}`)
		check(t, svc("cli", "srv2", "tcp", 81, true), svc("cli", "srv2", "tcp", 80, false), pod("cli", "srv2", "tcp", 80, false))
		w.update("np-a", `{metadata: {name: moving}, spec: {podSelector: {matchLabels: {app: srv2}}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: c}}}], ports: [{port: serve-81}]}]}}`)
		check(t, svc("cli2", "srv2", "tcp", 81, true), svc("cli", "srv2", "tcp", 81, false), pod("cli", "srv2", "tcp", 81, false), svc("cli2", "srv2", "tcp", 80, false))
	})
	t.Run("through Services: a policy deleted", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: deny-srv1}, spec: {podSelector: {matchLabels: {app: srv1}}, policyTypes: [Ingress]}}`)
		defer w.delete("np-a", "deny-srv1")
		check(t, svc("cli", "srv2", "tcp", 80, false), svc("cli", "srv1", "tcp", 80, false))
		w.delete("np-a", "moving")
		check(t, svc("cli", "srv2", "tcp", 80, true), svc("cli", "srv2", "tcp", 81, true), svc("cli", "srv2", "udp", 80, true), pod("cli", "srv2", "tcp", 80, true),
			svc("cli", "srv1", "tcp", 80, false))
	})
	hairpin := w.hairpinProbes
	t.Run("hairpin through a pod's own Service: named ports", func(t *testing.T) {
		w.apply("np-a", namedPortsPolicy)
		defer w.delete("np-a", "named-ports")
		check(t, hairpin(map[string]bool{"tcp/81": true, "udp/80": true})...)
	})
	t.Run("hairpin through a pod's own Service: numbered ports", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: numbered-ports}, spec: {podSelector: {}, ingress: [{ports: [{protocol: TCP, port: 81}]}]}}`)
		defer w.delete("np-a", "numbered-ports")
		check(t, hairpin(map[string]bool{"tcp/81": true})...)
	})
	t.Run("hairpin through a pod's own Service: egress", func(t *testing.T) {
		w.apply("np-a", `{metadata: {name: egress-to-b}, spec: {podSelector: {}, policyTypes: [Egress], egress: [{to: [{namespaceSelector: {matchLabels: {team: b}}}]}]}}`)
		defer w.delete("np-a", "egress-to-b")
		w.apply("np-a", `{metadata: {name: ingress-81}, spec: {podSelector: {}, ingress: [{ports: [{port: serve-81}]}]}}`)
		defer w.delete("np-a", "ingress-81")
		check(t, append(hairpin(map[string]bool{"tcp/81": true}), svc("srv1", "srv2", "tcp", 81, false), svc("srv1", "cli", "tcp", 80, true), svc("srv2", "srv1", "udp", 80, false))...)
	})
}

// namedPortsPolicy isolates every pod of np-a for ingress but on its named
// ports serve-81 (TCP 81) and serve-udp-80 (UDP 80), from any peer.
const namedPortsPolicy = `{metadata: {name: named-ports}, spec: {podSelector: {}, ingress: [{ports: [{port: serve-81}, {protocol: UDP, port: serve-udp-80}]}]}}`

// hairpinProbes: srv1 (node 2) and srv2 (node 1) each reach themselves
// through their own Service (via-NAME) on TCP 80 and 81 and UDP 80,
// allowed by the policies or not, while cli gets on srv1 only what they
// allow (allowed: "tcp/81" and the like).
func (w *policyWorld) hairpinProbes(allowed map[string]bool) []probe {
	var ps []probe
	for _, p := range []struct {
		proto string
		port  int
	}{{"tcp", 80}, {"tcp", 81}, {"udp", 80}} {
		key := fmt.Sprintf("%s/%d", p.proto, p.port)
		for _, from := range []string{"srv1", "srv2"} {
			ps = append(ps, probe{from, p.proto, net.JoinHostPort(w.vip["via-"+from], fmt.Sprint(p.port)), from, true})
		}
		ps = append(ps, probe{"cli", p.proto, net.JoinHostPort(w.vip["via-srv1"], fmt.Sprint(p.port)), "srv1", allowed[key]})
	}
	return ps
}

// sockHairpin switches the cluster's proxy to vnetlab-sock (socket
// programs on the nodes' cgroups: a pod's connection to its own Service
// connects to its own address) and probes the hairpin of the named-ports
// policy again, each probe a process of the pod (its namespace and its
// cgroup, which the socket programs act for).
func sockHairpin(t *testing.T, w *policyWorld) {
	sw, err := SetProxy(w.ctx, w.st.Name, clusternet.VnetlabSock, false, 2*time.Minute, t.Logf)
	if err != nil {
		t.Fatalf("set-proxy %s: %v", clusternet.VnetlabSock, err)
	}
	t.Logf("proxy %s -> %s in %s", sw.From, sw.To, sw.Took.Round(time.Millisecond))
	w.apply("np-a", namedPortsPolicy)
	defer w.delete("np-a", "named-ports")
	probes := w.hairpinProbes(map[string]bool{"tcp/81": true, "udp/80": true})
	cgroups := map[string]string{}
	for _, p := range probes {
		if cgroups[p.from] == "" {
			cg, err := cgroup.PodOf(w.netns[p.from])
			if err != nil {
				t.Fatalf("pod %s's cgroup: %v", p.from, err)
			}
			cgroups[p.from] = cg
		}
	}
	var wrong []string
	err = waitFor(w.ctx, 30*time.Second, "the probes' outcomes", func() bool {
		wrong = nil
		for _, p := range probes {
			got, err := switchWho(w.ctx, w.netns[p.from], cgroups[p.from], p.proto, p.addr)
			if answered := err == nil && got == p.answer; answered != p.want {
				wrong = append(wrong, fmt.Sprintf("%s -> %s %s (%s): answered %q (%v), want answered %v", p.from, p.proto, p.addr, p.answer, got, err, p.want))
			}
		}
		return len(wrong) == 0
	})
	if err != nil {
		t.Errorf("%v:\n  %s", err, strings.Join(wrong, "\n  "))
	}
}

// svcVIP creates Service via-NAME for pod name (in its namespace) with
// TCP 80, TCP 81 (target port serve-81) and UDP 80 (target port
// serve-udp-80), and notes its ClusterIP in w.vip under its name.
func (w *policyWorld) svcVIP(name string) {
	w.t.Helper()
	ns := ""
	for _, p := range policyPods {
		if p.name == name {
			ns = p.ns
		}
	}
	svc, err := w.cs.CoreV1().Services(ns).Create(w.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "via-" + name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{
			{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
			{Name: "tcp-81", Protocol: corev1.ProtocolTCP, Port: 81, TargetPort: intstr.FromString("serve-81")},
			{Name: "udp-80", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromString("serve-udp-80")},
		}}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.vip["via-"+name] = svc.Spec.ClusterIP
}

// update replaces the spec of policy doc's name in ns with doc's.
func (w *policyWorld) update(ns, doc string) {
	w.t.Helper()
	var p networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		w.t.Fatalf("policy %s: %v", doc, err)
	}
	have, err := w.cs.NetworkingV1().NetworkPolicies(ns).Get(w.ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	have.Spec = p.Spec
	if _, err := w.cs.NetworkingV1().NetworkPolicies(ns).Update(w.ctx, have, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}
