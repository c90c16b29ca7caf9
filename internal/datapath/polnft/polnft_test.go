package polnft

import (
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
			Ingress: netpol.Side{Isolated: true, Allow: []netpol.Allow{
				{Pods: []netip.Addr{b4, b6}, Ports: ports},
				{Blocks: []netpol.Block{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Except: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}}, AnyPort: true}}},
			Egress: netpol.Side{Isolated: true, Allow: []netpol.Allow{{AnyPeer: true, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 53, Last: 53}}}}}},
		{Pod: "b", Namespace: "x", IPs: []netip.Addr{b4, b6}},
	}}
}

// The script in the shape the package comment describes.
func TestScript(t *testing.T) {
	s := Script(rules())
	for _, want := range []string{
		"add chain inet vnetlab-netpol filter-forward { type filter hook forward priority filter ; policy accept ; }\nadd rule inet vnetlab-netpol filter-forward ct state established,related accept\n",
		"add rule inet vnetlab-netpol ingress-x/a counter comment \"evaluated\"\nadd rule inet vnetlab-netpol ingress-x/a ip saddr { 10.244.1.10 } accept\nadd rule inet vnetlab-netpol ingress-x/a ip6 saddr { fd00:10:244:1::10 } accept\n",
		"add rule inet vnetlab-netpol ingress-x/a ip saddr { 10.244.2.20 } meta l4proto . th dport { tcp . 80, tcp . 1000-2000, udp . 0-65535 } accept\n",
		"add rule inet vnetlab-netpol ingress-x/a ip saddr 10.0.0.0/8 ip saddr != { 10.1.0.0/16 } accept\n",
		"add rule inet vnetlab-netpol egress-x/a meta l4proto . th dport { tcp . 53 } return\n",
		"add rule inet vnetlab-netpol egress-x/a counter drop comment \"denied\"\n",
		"add element inet vnetlab-netpol ingress-v4 { 10.244.1.10 : goto ingress-x/a }\n",
		"add element inet vnetlab-netpol egress-v6 { fd00:10:244:1::10 : jump egress-x/a }\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "x/b") {
		t.Errorf("pod x/b is isolated by nothing but has a chain:\n%s", s)
	}
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
