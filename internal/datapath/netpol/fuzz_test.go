package netpol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// `policy add -f`: a file of NetworkPolicy, Namespace and Pod documents
// (the truth tables' policies seed it). Refused: one line naming the
// document. Read: written back as documents it reads the same; then in a
// world of 3 namespaces of 3 pods with named ports (both families) beside
// the file's own pods, Check refuses with one line, or Compile's rules
// give the reference's verdict (World.Allowed) for every pair of ends of
// a family (pods and addresses outside, in and out of the ipBlocks), on
// each protocol and the ports the policies name.
func FuzzParseCompile(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.yaml))
	}
	f.Add([]byte(shopPod + `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p, namespace: shop}
spec:
  podSelector: {matchExpressions: [{key: app, operator: In, values: [db]}]}
  policyTypes: [Ingress, Egress]
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}, podSelector: {}}], ports: [{port: pg}, {protocol: UDP, port: 50, endPort: 60}]}]
  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.1.0/24]}}, {ipBlock: {cidr: "fd00::/16", except: ["fd00::1:0/112"]}}]}]
`))
	f.Add([]byte(`{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "j"}, "spec": {"podSelector": {}, "egress": [{}]}}`))
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"))
	f.Add([]byte("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {podSelectr: {}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse(data)
		if err != nil {
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "document ") {
				t.Fatalf("error does not say which document: %v", err)
			}
			return
		}
		if len(doc.Policies)+len(doc.Pods)+len(doc.Namespaces) > 20 {
			return // the world below stays small
		}
		out := writeDoc(t, doc)
		doc2, err := Parse(out)
		if err != nil {
			t.Fatalf("written back, refused: %v\n%s", err, out)
		}
		if out2 := writeDoc(t, doc2); !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
		w, ends := fuzzWorld(doc)
		if err := Check(w); err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		rules := Compile(w)
		ports := map[uint16]bool{80: true, 81: true}
		for _, p := range w.Policies {
			for _, r := range p.Spec.Ingress {
				addPorts(ports, r.Ports)
			}
			for _, r := range p.Spec.Egress {
				addPorts(ports, r.Ports)
			}
		}
		for _, s := range ends {
			for _, d := range ends {
				if s.Is4() != d.Is4() || (w.PodAt(s) == nil && w.PodAt(d) == nil) {
					continue
				}
				for _, proto := range Protos {
					for port := range ports {
						if want, got := w.Allowed(s, d, proto, port), rules.Allowed(s, d, proto, port); want != got {
							t.Fatalf("%s -> %s %s/%d: the reference says %v, the compiled rules %v", s, d, proto, port, want, got)
						}
					}
				}
			}
		}
	})
}

// addPorts adds the ports a rule names, and the ones either side of a
// range, to ports (at most a few).
func addPorts(ports map[uint16]bool, pps []networkingv1.NetworkPolicyPort) {
	for _, pp := range pps {
		if len(ports) > 12 || pp.Port == nil || pp.Port.IntVal < 1 || pp.Port.IntVal > 65535 {
			continue
		}
		lo, hi := pp.Port.IntVal, pp.Port.IntVal
		if pp.EndPort != nil && *pp.EndPort >= lo && *pp.EndPort <= 65535 {
			hi = *pp.EndPort
		}
		for _, p := range []int32{lo - 1, lo, hi, hi + 1} {
			if p >= 1 && p <= 65535 {
				ports[uint16(p)] = true
			}
		}
	}
}

// fuzzWorld is the truth tables' 9 pods with both families, the document's
// namespaces and pods (addresses from 10.9.0.0/16 and fd09::/64), its
// policies; and the ends to probe: every pod address, two outside
// addresses of each family, and the first and last address of every
// ipBlock and except.
func fuzzWorld(doc Doc) (*World, []netip.Addr) {
	w := &World{Policies: doc.Policies}
	var ends []netip.Addr
	for i, ns := range nsNames {
		w.Namespaces = append(w.Namespaces, Namespace{Name: ns, Labels: Labels{"ns": ns}})
		for j, pn := range podNames {
			v4 := netip.AddrFrom4([4]byte{10, 0, byte(i + 1), byte(j + 1)})
			v6 := netip.MustParseAddr(fmt.Sprintf("fd00::%d:%d", i+1, j+1))
			w.Pods = append(w.Pods, Pod{Name: pn, Namespace: ns, Labels: Labels{"pod": pn}, IPs: []netip.Addr{v4, v6},
				Ports: []NamedPort{{"serve-80-tcp", TCP, 80}, {"serve-81-tcp", TCP, 81}, {"serve-80-udp", UDP, 80}, {"serve-81-udp", UDP, 81}}})
			ends = append(ends, v4, v6)
		}
	}
	w.Namespaces = append(w.Namespaces, doc.Namespaces...)
	for i, p := range doc.Pods {
		p.IPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)}), netip.MustParseAddr(fmt.Sprintf("fd09::%d", i+1))}
		w.Pods = append(w.Pods, p)
		ends = append(ends, p.IPs...)
	}
	for _, o := range []string{"10.0.9.9", "192.168.9.9", "fd00::9:9", "fd09::9:9"} {
		ends = append(ends, netip.MustParseAddr(o))
	}
	blocks := func(peers []networkingv1.NetworkPolicyPeer) {
		for _, peer := range peers {
			if peer.IPBlock == nil {
				continue
			}
			for _, c := range append([]string{peer.IPBlock.CIDR}, peer.IPBlock.Except...) {
				if pfx, err := netip.ParsePrefix(c); err == nil && len(ends) < 64 {
					pfx = pfx.Masked()
					ends = append(ends, pfx.Addr(), lastAddr(pfx))
				}
			}
		}
	}
	for _, p := range doc.Policies {
		for _, r := range p.Spec.Ingress {
			blocks(r.From)
		}
		for _, r := range p.Spec.Egress {
			blocks(r.To)
		}
	}
	return w, ends
}

// lastAddr is the last address of pfx.
func lastAddr(pfx netip.Prefix) netip.Addr {
	b := pfx.Addr().AsSlice()
	for i := pfx.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// writeDoc writes doc as a JSON document stream Parse reads: its
// namespaces, its pods (their named ports in one container) and its
// policies.
func writeDoc(t *testing.T, doc Doc) []byte {
	t.Helper()
	var objs []any
	for _, ns := range doc.Namespaces {
		objs = append(objs, corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: KindNamespace},
			ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels}})
	}
	for _, p := range doc.Pods {
		c := corev1.Container{Name: "c"}
		for _, np := range p.Ports {
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: np.Name, Protocol: corev1.Protocol(np.Proto), ContainerPort: int32(np.Port)})
		}
		objs = append(objs, corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: KindPod},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}})
	}
	for _, p := range doc.Policies {
		p.APIVersion, p.Kind = networkingv1.SchemeGroupVersion.String(), KindNetworkPolicy
		objs = append(objs, p)
	}
	var out bytes.Buffer
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("write back: %v", err)
		}
		out.WriteString("---\n")
		out.Write(b)
		out.WriteString("\n")
	}
	return out.Bytes()
}
