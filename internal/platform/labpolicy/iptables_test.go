package labpolicy

import (
	"fmt"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

var (
	iptV4 = iptFamily{family.IPv4, "iptables-restore", "iptables", "inet"}
	iptV6 = iptFamily{family.IPv6, "ip6tables-restore", "ip6tables", "inet6"}
)

// iptInstall is family f's script loading r into a node holding none of
// the provider's objects.
func iptInstall(f iptFamily, r *netpol.Rules) *iptScript {
	return iptPlan([]iptFamily{f}, nil, r, netpol.Diff(nil, r))[0]
}

func TestIptablesScript(t *testing.T) {
	r := scriptRules(t)
	v4 := iptInstall(iptV4, r)
	chainIn, chainEg := iptIngress+iptHash("default", "pod-a"), iptEgress+iptHash("default", "pod-a")
	allow := r.Pods[0].Ingress.Allow[0]
	bucket := fmt.Sprintf("%s-%02X", chainIn, allow.Hash()%iptBuckets)
	rules := v4.rules()
	for _, want := range []string{
		"*filter\n:VNL-PASS - [0:0]\n:VNL-NETPOL - [0:0]\n:VNL-INGRESS - [0:0]\n",
		"-A VNL-NETPOL -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A VNL-NETPOL -s 192.168.10.10 -j " + chainEg + "\n-A VNL-NETPOL -j VNL-INGRESS\n",
		"-A VNL-INGRESS -d 192.168.10.10 -j " + chainIn + "\n",
		"-A VNL-PASS -j VNL-INGRESS\n-A VNL-PASS -j ACCEPT\n",
		"-A " + chainIn + " -j " + bucket + "\n-A " + chainIn + " -j DROP\n",
		"-A " + bucket + " -s 10.0.0.0/8 -m set ! --match-set ",
		" src -p tcp -m multiport --dports 80,1000:2000 -j ACCEPT\n",
		" src -p udp -j ACCEPT\n",
		"-A " + chainEg + " -j DROP\n",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("iptables rules lack %q:\n%s", want, rules)
		}
	}
	pods := newIptSet(iptV4, bucket, "hash:ip", []string{"192.168.10.11"}).name
	except := newIptSet(iptV4, bucket, "hash:net", []string{"10.1.0.0/16"}).name
	sets := v4.sets.String()
	if strings.Count(sets, "swap ") != 2 || !strings.Contains(sets, "add "+pods+"-t 192.168.10.11\n") || !strings.Contains(sets, "swap "+except+"-t "+except+"\n") ||
		!strings.Contains(rules, "--match-set "+pods+" src ") {
		t.Errorf("ipsets:\n%s", sets)
	}
	if len(pods)+2 > 31 || len(bucket) > 28 {
		t.Errorf("set %s is too long for ipset (31 with -t) or chain %s for iptables (28)", pods, bucket)
	}
	var many []netpol.PortRange
	for p := uint16(1); p < 29; p += 2 {
		many = append(many, netpol.PortRange{Proto: netpol.TCP, First: p, Last: p})
	}
	many = append(many, netpol.PortRange{Proto: netpol.TCP, First: 29, Last: 40})
	if got := iptPorts(&netpol.Allow{Ports: many}); len(got) != 2 || !strings.HasSuffix(got[1], "--dports 29:40 ") {
		t.Errorf("14 ports and a range are two multiport matches: %q", got)
	}
	empty := iptInstall(iptV6, r)
	if !strings.Contains(empty.rules(), "--icmpv6-type 135 -j ACCEPT") || empty.sets.Len() != 0 {
		t.Errorf("IPv6 of an IPv4 world: %s %s", empty.rules(), empty.sets.String())
	}
}

// blockRules is a pod isolated for ingress, allowing n /32 blocks, and
// pod-b, isolated for ingress when isolated.
func blockRules(n int, isolated bool) *netpol.Rules {
	server := netpol.PodRules{Pod: "pod-a", Namespace: "default", IPs: []netip.Addr{netip.MustParseAddr("192.168.10.10")}}
	server.Ingress.Isolated = true
	for i := range n {
		b := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 32)
		server.Ingress.Allow = append(server.Ingress.Allow, &netpol.Allow{Blocks: []netpol.Block{{CIDR: b}}, AnyPort: true})
	}
	other := netpol.PodRules{Pod: "pod-b", Namespace: "default", IPs: []netip.Addr{netip.MustParseAddr("192.168.10.11")}}
	other.Ingress.Isolated = isolated
	return &netpol.Rules{Pods: []netpol.PodRules{server, other}}
}

// An Update writes what changed: an Allow added or deleted is its rules
// inserted at their place in its bucket or deleted, or, when the bucket
// holds no other, the bucket created or deleted and the pod chain's jump
// to it inserted or deleted; a pod isolated or no longer isolated is its
// dispatch jump and its chain, nothing else.
func TestIptablesUpdateWritesTheChange(t *testing.T) {
	chain := iptIngress + iptHash("default", "pod-a")
	for _, n := range []int{0, 1, 300} {
		few, more := blockRules(n, false), blockRules(n+1, false)
		added := more.Pods[0].Ingress.Allow[n]
		bucket := fmt.Sprintf("%s-%02X", chain, added.Hash()%iptBuckets)
		rule := "-s " + added.Blocks[0].CIDR.String() + " -j ACCEPT"
		held, before := 0, map[uint64]bool{} // the bucket's Allows with the added one, the last; the buckets before it
		for _, a := range more.Pods[0].Ingress.Allow {
			if k := a.Hash() % iptBuckets; k == added.Hash()%iptBuckets {
				held++
			} else if k < added.Hash()%iptBuckets {
				before[k] = true
			}
		}
		wantAdded := fmt.Sprintf("*filter\n-I %s %d %s\nCOMMIT\n", bucket, held, rule)
		wantDeleted := fmt.Sprintf("*filter\n-D %s %s\nCOMMIT\n", bucket, rule)
		if held == 1 {
			wantAdded = fmt.Sprintf("*filter\n:%s - [0:0]\n-A %s %s\n-I %s %d -j %s\nCOMMIT\n", bucket, bucket, rule, chain, len(before)+1, bucket)
			wantDeleted = fmt.Sprintf("*filter\n:%s - [0:0]\n-D %s -j %s\n-X %s\nCOMMIT\n", bucket, chain, bucket, bucket)
		}
		for _, step := range []struct {
			name, want string
			old, new   *netpol.Rules
		}{{"added", wantAdded, few, more}, {"deleted", wantDeleted, more, few}} {
			got := iptPlan([]iptFamily{iptV4}, step.old, step.new, netpol.Diff(step.old, step.new))[0].rules()
			if got != step.want {
				t.Errorf("%d Allows, one %s (%d in its bucket): rules\n%s\nwant\n%s", n, step.name, held, got, step.want)
			}
		}
	}
	open, isolated := blockRules(10, false), blockRules(10, true)
	chainB := iptIngress + iptHash("default", "pod-b")
	for _, step := range []struct {
		old, new *netpol.Rules
		want     string
	}{
		{open, isolated, "*filter\n:" + chainB + " - [0:0]\n-A " + chainB + " -j DROP\n-I VNL-INGRESS 2 -d 192.168.10.11 -j " + chainB + "\nCOMMIT\n"},
		{isolated, open, "*filter\n:" + chainB + " - [0:0]\n-D VNL-INGRESS -d 192.168.10.11 -j " + chainB + "\n-X " + chainB + "\nCOMMIT\n"},
	} {
		if got := iptPlan([]iptFamily{iptV4}, step.old, step.new, netpol.Diff(step.old, step.new))[0].rules(); got != step.want {
			t.Errorf("rules\n%s\nwant\n%s", got, step.want)
		}
	}
	if got := iptPlan([]iptFamily{iptV4}, open, open, nil)[0].rules(); got != "" {
		t.Errorf("no change: %q", got)
	}
}

// What an Update computes, before iptables-restore runs, for one policy
// added to, or deleted from, a pod that 10,000 others select (the policies
// knob's largest set), as a session's compiler hands the change over (the
// Allows both sides keep are the same pointers).
//
//	go test -run XXX -bench IptablesChange ./internal/platform/labpolicy/
func BenchmarkIptablesChange(b *testing.B) {
	w, allow := netpoltest.BenchWorld(10000)
	c := netpol.NewCompilerOf(w, nil)
	c.Changes()
	for b.Loop() {
		old := c.Rules()
		c.SetPolicy(allow)
		iptPlan([]iptFamily{iptV4}, &old, new(c.Rules()), c.Changes())
		old = c.Rules()
		c.DeletePolicy(allow.Namespace, allow.Name)
		iptPlan([]iptFamily{iptV4}, &old, new(c.Rules()), c.Changes())
	}
}
