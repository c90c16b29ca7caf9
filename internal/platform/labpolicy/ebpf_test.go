package labpolicy

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// servicePolicies: pod-c may send only to pod-a on TCP 8080, and accepts
// nothing (its replies come back translated from the clusterIP).
const servicePolicies = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c-out, namespace: default}
spec:
  podSelector: {matchLabels: {pod: pod-c}}
  policyTypes: [Ingress, Egress]
  egress: [{to: [{podSelector: {matchLabels: {pod: pod-a}}}], ports: [{port: 8080}]}]
`

// TestServiceEgressInLab: a pod's egress to a clusterIP is decided against
// the backend the eBPF Service plane translates it to (pod-c may reach
// pod-a's Service, not pod-b's, though both clusterIPs are no pod), and the
// reply, translated back from the clusterIP, passes the client's ingress,
// on veth-ebpf (translation and bpf_redirect_peer in the node end's
// program) and veth-routed (the ebpf Service provider's endpoints). On
// veth-routed, Services of the node's netfilter are refused first.
func TestServiceEgressInLab(t *testing.T) {
	requireRoot(t)
	for _, mode := range []string{modes.VethEBPF, modes.VethRouted} {
		t.Run(mode, func(t *testing.T) {
			l, _ := testnet.UpLab(t, lab.Spec{Name: map[string]string{modes.VethEBPF: "np-svcebpf", modes.VethRouted: "np-svcrouted"}[mode], Mode: mode, PodCIDR: lab.DefaultPodCIDR, PodCIDR6: lab.DefaultPodCIDR6, Family: family.Dual}, 3)
			l.Release()
			st := l.State
			a, b, c := st.Pods[0], st.Pods[1], st.Pods[2]
			for _, p := range []lab.PodState{a, b} {
				testnet.Serve(t, p.NS, 8080, "")
				testnet.Serve6(t, p.NS, 8080, "")
			}
			vips := map[string][2]string{a.Name: {"10.96.0.50", "fd00:10:96::50"}, b.Name: {"10.96.0.51", "fd00:10:96::51"}}
			doc, err := netpol.Parse([]byte(servicePolicies))
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Provider: EBPF}
			cfg.Merge(doc)
			provider := ""
			if mode == modes.VethRouted {
				k, _ := labservice.ParseKey("10.96.0.99:80/tcp")
				if _, err := labservice.Add(st.Name, labservice.AddRequest{Key: k, Backends: []labservice.BackendSpec{{Host: a.Name, Port: 8080}}, Provider: labservice.IPTables}); err != nil {
					t.Fatal(err)
				}
				err := Commit(st, nil, cfg.Clone())
				if err == nil || !strings.Contains(err.Error(), "translated by the node's iptables") {
					t.Fatalf("ebpf policies beside iptables Services: %v, want a refusal", err)
				}
				if _, err := labservice.Del(st.Name, k); err != nil {
					t.Fatal(err)
				}
				provider = labservice.EBPF
			}
			for _, p := range []lab.PodState{a, b} {
				for i, v := range vips[p.Name] {
					k, err := labservice.ParseKey(net.JoinHostPort(v, "80") + "/tcp")
					if err != nil {
						t.Fatal(err)
					}
					host := p.IP
					if i == 1 {
						host = p.IP6
					}
					if _, err := labservice.Add(st.Name, labservice.AddRequest{Key: k, Backends: []labservice.BackendSpec{{Host: host, Port: 8080}}, Provider: provider}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if mode == modes.VethRouted {
				if _, err := labservice.Attach(st.Name, labservice.PodRef{Pod: c.Name}); err != nil {
					t.Fatal(err)
				}
			}
			if err := Commit(st, nil, cfg); err != nil {
				t.Fatal(err)
			}
			w, err := cfg.World(st)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []lab.PodState{a, b} {
				for i, v := range vips[p.Name] {
					backend := p.IP
					if i == 1 {
						backend = p.IP6
					}
					src := c.IP
					if i == 1 {
						src = c.IP6
					}
					want := w.Allowed(netip.MustParseAddr(src), netip.MustParseAddr(backend), netpol.TCP, 8080)
					for _, dst := range []struct{ ip, what string }{{v, "clusterIP " + v}, {backend, "pod IP"}} {
						port := 80
						if dst.ip == backend {
							port = 8080
						}
						got, err := connects(c.NS, dst.ip, netpol.TCP, port)
						if err != nil {
							t.Fatalf("pod-c -> %s (%s): %v", p.Name, dst.what, err)
						}
						if got != want {
							t.Errorf("pod-c -> %s's %s: connected %v, the model says %v for its backend", p.Name, dst.what, got, want)
						}
					}
				}
			}
			var cnt polbpf.Counters
			err = withPlane(st, func(pl *polbpf.Plane) (err error) { cnt, err = pl.Counters(); return })
			if err != nil {
				t.Fatal(err)
			}
			// Four clusterIP connections (two families, two Services), each
			// SYN deferred at pod-c's interface (retransmissions too).
			if cnt.Deferred < 4 || cnt.Denied == 0 {
				t.Errorf("counters %+v: want at least 4 deferred and some denied", cnt)
			}
			pr, err := ebpfProvider{}.Prove(st)
			if err != nil {
				t.Fatal(err)
			}
			if pr.Objects == 0 || pr.Evaluated == 0 || pr.Denied == 0 {
				t.Errorf("proof %+v: want objects, evaluated and denied packets", pr)
			}
			if err := Remove(st, cfg); err != nil {
				t.Fatal(err)
			}
			podPrograms(t, st, false)
		})
	}
}
