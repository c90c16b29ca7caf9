package polnft

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// rules: pod x/a isolated both ways (ingress from x/b's addresses on TCP
// 80 and 1000-2000 and any UDP, and from 10.0.0.0/8 except 10.1.0.0/16;
// egress to anything on TCP 53), pod x/b open; both families.
func rules() *netpol.Rules {
	a4, a6 := netip.MustParseAddr("10.244.1.10"), netip.MustParseAddr("fd00:10:244:1::10")
	b4, b6 := netip.MustParseAddr("10.244.2.20"), netip.MustParseAddr("fd00:10:244:2::20")
	ports := []netpol.PortRange{{Proto: netpol.TCP, First: 80, Last: 80}, {Proto: netpol.TCP, First: 1000, Last: 2000}, {Proto: netpol.UDP, First: 0, Last: 65535}}
	return &netpol.Rules{Pods: []netpol.PodRules{
		{Pod: "a", Namespace: "x", IPs: []netip.Addr{a4, a6},
			Ingress: netpol.Side{Isolated: true, Allow: []*netpol.Allow{
				{Pods: []netip.Addr{b4, b6}, Ports: ports},
				{Blocks: []netpol.Block{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Except: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}}, AnyPort: true}}},
			Egress: netpol.Side{Isolated: true, Allow: []*netpol.Allow{{AnyPeer: true, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 53, Last: 53}}}}}},
		{Pod: "b", Namespace: "x", IPs: []netip.Addr{b4, b6}},
	}}
}

// The script in the shape the package comment describes: the base chain,
// the pod chains with their named counters, own addresses and jumps to
// their buckets, the buckets' rules and the map elements.
func TestScript(t *testing.T) {
	r := rules()
	s := Script(r)
	bucket := func(dir string, a *netpol.Allow) string {
		return fmt.Sprintf("%s-x/a/%d", dir, a.Hash()%Buckets)
	}
	in, out := bucket("ingress", r.Pods[0].Ingress.Allow[0]), bucket("egress", r.Pods[0].Egress.Allow[0])
	for _, want := range []string{
		"add chain inet vnetlab-netpol filter-forward { type filter hook forward priority filter ; policy accept ; }\nadd rule inet vnetlab-netpol filter-forward ct state established,related accept\n",
		"add rule inet vnetlab-netpol filter-forward ip6 saddr vmap @egress-v6\nadd rule inet vnetlab-netpol filter-forward goto filter-ingress\n",
		"add rule inet vnetlab-netpol filter-ingress ip6 daddr vmap @ingress-v6\nadd rule inet vnetlab-netpol filter-ingress accept\n",
		"add counter inet vnetlab-netpol ingress-x/a/evaluated\nadd counter inet vnetlab-netpol ingress-x/a/denied\nadd chain inet vnetlab-netpol ingress-x/a\n",
		"add rule inet vnetlab-netpol ingress-x/a counter name ingress-x/a/evaluated\nadd rule inet vnetlab-netpol ingress-x/a ip saddr { 10.244.1.10 } accept\nadd rule inet vnetlab-netpol ingress-x/a ip6 saddr { fd00:10:244:1::10 } accept\n",
		"add rule inet vnetlab-netpol ingress-x/a jump " + in + "\n",
		allowRule(in, "ip saddr { 10.244.2.20 } meta l4proto . th dport { tcp . 80, tcp . 1000-2000, udp . 0-65535 } accept"),
		"ip saddr 10.0.0.0/8 ip saddr != { 10.1.0.0/16 } accept comment ",
		"add rule inet vnetlab-netpol ingress-x/a counter name ingress-x/a/denied drop\n",
		allowRule(out, "meta l4proto . th dport { tcp . 53 } goto filter-ingress"),
		"add rule inet vnetlab-netpol egress-x/a counter name egress-x/a/denied drop\n",
		"add element inet vnetlab-netpol ingress-v4 { 10.244.1.10 : goto ingress-x/a }\n",
		"add element inet vnetlab-netpol egress-v6 { fd00:10:244:1::10 : goto egress-x/a }\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "x/b") {
		t.Errorf("pod x/b is isolated by nothing but has a chain:\n%s", s)
	}
	if n := Objects(s); n != 27 {
		t.Errorf("Objects: %d, want 8 rules of the frame, 6 of egress-x/a's chains, 9 of ingress-x/a's (two buckets) and 4 elements", n)
	}
}

// A change writes what it changes: an Allow added to a pod rewrites its
// bucket (and its pod chain, the bucket being new), the pod's map elements
// stay; the pod no longer isolated loses its chains, its counters and its
// elements, the elements first, the jumps to a bucket before the bucket;
// no change, no script.
func TestDelta(t *testing.T) {
	old := rules()
	grown := rules()
	extra := &netpol.Allow{Blocks: []netpol.Block{{CIDR: netip.MustParsePrefix("192.0.2.0/24")}}, AnyPort: true}
	grown.Pods[0].Ingress.Allow = append(grown.Pods[0].Ingress.Allow, extra)
	b := fmt.Sprintf("ingress-x/a/%d", extra.Hash()%Buckets)
	d := Delta(netpol.Diff(old, grown))
	for _, want := range []string{
		"add chain inet vnetlab-netpol " + b + "\n" + allowRule(b, "ip saddr 192.0.2.0/24 accept") + "flush chain inet vnetlab-netpol ingress-x/a\n",
		"add rule inet vnetlab-netpol ingress-x/a jump " + b + "\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("delta lacks %q:\n%s", want, d)
		}
	}
	for _, not := range []string{"egress", "element", "counter inet", "delete"} {
		if strings.Contains(d, not) {
			t.Errorf("delta has %q, which the change does not touch:\n%s", not, d)
		}
	}
	open := rules()
	open.Pods[0].Ingress = netpol.Side{}
	d = Delta(netpol.Diff(old, open))
	order := []string{
		"delete element inet vnetlab-netpol ingress-v4 { 10.244.1.10 }\n",
		"flush chain inet vnetlab-netpol ingress-x/a\ndelete chain inet vnetlab-netpol ingress-x/a\n",
		"flush chain inet vnetlab-netpol ingress-x/a/",
		"delete counter inet vnetlab-netpol ingress-x/a/denied\n",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(d[at:], want)
		if i < 0 {
			t.Fatalf("delta lacks %q after byte %d:\n%s", want, at, d)
		}
		at += i
	}
	if strings.Contains(d, "egress") || strings.Contains(d, "add ") {
		t.Errorf("delta touches egress or adds:\n%s", d)
	}
	if d := Delta(netpol.Diff(old, rules())); d != "" {
		t.Errorf("no change: delta %q", d)
	}
}

// allowRule is the line adding an Allow's rule r to bucket chain b, with
// the comment Apply finds it by.
func allowRule(b, r string) string {
	return fmt.Sprintf("add rule inet vnetlab-netpol %s %s comment %q\n", b, r, ruleKey(r))
}

// Load puts the table in a namespace (nft takes the script) and replaces
// it whole the second time; Remove takes it away, and again is no error.
func TestLoadRemove(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	ns := "vnl-polnft-test"
	if err := nsutil.Create(ns, "vnetlab polnft test"); err != nil {
		t.Fatal(err)
	}
	defer nsutil.Delete(ns)
	list := func() string {
		out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "ruleset").CombinedOutput()
		return string(out)
	}
	for i := 0; i < 2; i++ {
		if err := Load(ns, Script(rules())); err != nil {
			t.Fatal(err)
		}
	}
	got := list()
	for _, want := range []string{"chain ingress-x/a", "chain egress-x/a", "10.244.1.10 : goto ingress-x/a", "ip saddr 10.0.0.0/8 ip saddr != 10.1.0.0/16 accept"} {
		if !strings.Contains(got, want) {
			t.Errorf("the namespace's ruleset lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "table inet "+Table) != 1 {
		t.Errorf("a second Load left %d tables:\n%s", strings.Count(got, "table inet "+Table), got)
	}
	for i := 0; i < 2; i++ {
		if err := Remove(ns); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(); strings.Contains(got, Table) {
		t.Errorf("the table is still there after Remove:\n%s", got)
	}
	if err := Load(ns, "add rule inet nope"); err == nil || !strings.Contains(err.Error(), "nft -f in "+ns) {
		t.Errorf("a bad script: %v, want an error naming the namespace", err)
	}
}
