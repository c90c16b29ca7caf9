package labpolicy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
)

// The providers' text for one compiled world, read as a person would: the
// kernel's verdicts are the lab tests' business (lab_test.go); these keep
// the shapes docs/policies.md describes.

func scriptRules(t *testing.T) *netpol.Rules {
	t.Helper()
	c := &Config{}
	d, err := netpol.Parse([]byte(`
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: p}
spec:
  podSelector: {matchLabels: {pod: pod-a}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from: [{podSelector: {matchLabels: {pod: pod-b}}}, {ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}]
    ports: [{port: 80}, {port: 1000, endPort: 2000}, {protocol: UDP}]
`))
	if err != nil {
		t.Fatal(err)
	}
	c.Merge(d)
	w, err := c.World(fakeLab("veth-routed", nil))
	if err != nil {
		t.Fatal(err)
	}
	r := netpol.Compile(w)
	return &r
}

func TestNftScript(t *testing.T) {
	r := scriptRules(t)
	s := polnft.Script(r)
	var a *netpol.PodRules
	for i := range r.Pods {
		if r.Pods[i].Pod == "pod-a" {
			a = &r.Pods[i]
		}
	}
	if a == nil || len(a.Ingress.Allow) != 1 {
		t.Fatalf("pod-a's rules: %+v", a)
	}
	in := fmt.Sprintf("ingress-default/pod-a/%d", a.Ingress.Allow[0].Hash()%polnft.Buckets)
	for _, want := range []string{
		"add chain inet vnetlab-netpol filter-forward { type filter hook forward priority filter ; policy accept ; }\nadd rule inet vnetlab-netpol filter-forward ct state established,related accept\n",
		// An Allow's rule ends in the comment polnft.Apply deletes it by.
		"add rule inet vnetlab-netpol " + in + " ip saddr { 192.168.10.11 } meta l4proto . th dport { tcp . 80, tcp . 1000-2000, udp . 0-65535 } accept comment ",
		"add rule inet vnetlab-netpol " + in + " ip saddr 10.0.0.0/8 ip saddr != { 10.1.0.0/16 } meta l4proto . th dport { tcp . 80, tcp . 1000-2000, udp . 0-65535 } accept comment ",
		"add chain inet vnetlab-netpol ingress-default/pod-a\n",
		"add rule inet vnetlab-netpol ingress-default/pod-a counter name ingress-default/pod-a/evaluated\n",
		"add rule inet vnetlab-netpol ingress-default/pod-a jump " + in + "\nadd rule inet vnetlab-netpol ingress-default/pod-a counter name ingress-default/pod-a/denied drop\n",
		"add element inet vnetlab-netpol ingress-v4 { 192.168.10.10 : goto ingress-default/pod-a }\n",
		"add rule inet vnetlab-netpol egress-default/pod-a counter name egress-default/pod-a/denied drop\n",
		"add element inet vnetlab-netpol egress-v4 { 192.168.10.10 : goto egress-default/pod-a }\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("nft script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "pod-b :") {
		t.Errorf("pod-b is isolated by nothing but has a map element:\n%s", s)
	}
}
