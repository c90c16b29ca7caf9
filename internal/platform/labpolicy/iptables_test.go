package labpolicy

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

func TestIptablesScript(t *testing.T) {
	r := scriptRules(t)
	v4 := iptWrite(iptFamily{family.IPv4, "iptables-restore", "iptables", "inet"}, r)
	chainIn, chainEg := iptIngress+iptHash("default", "pod-a"), iptEgress+iptHash("default", "pod-a")
	rules := v4.head + v4.rest
	for _, want := range []string{
		"*filter\n:VNL-NETPOL - [0:0]\n",
		"-A VNL-NETPOL -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n",
		"-A VNL-NETPOL -s 192.168.10.10 -j " + chainEg + "\n-A VNL-NETPOL -d 192.168.10.10 -j " + chainIn + "\n",
		"-A " + chainIn + " -s 10.0.0.0/8 -m set ! --match-set ",
		" src -p tcp -m multiport --dports 80,1000:2000 -j ACCEPT\n",
		" src -p udp -j ACCEPT\n",
		"-A " + chainIn + " -j DROP\n",
		"-A " + chainEg + " -j DROP\n",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("iptables rules lack %q:\n%s", want, rules)
		}
	}
	if len(v4.setNames) != 2 || !strings.Contains(v4.sets, "add "+v4.setNames[0]+"-t 192.168.10.11\n") || !strings.Contains(v4.sets, "swap "+v4.setNames[1]+"-t "+v4.setNames[1]+"\n") {
		t.Errorf("ipsets %v:\n%s", v4.setNames, v4.sets)
	}
	for _, n := range append(v4.setNames, v4.chains...) {
		if len(n)+2 > 31 {
			t.Errorf("name %s is too long for ipset (31) or iptables (28)", n)
		}
	}
	var many []netpol.PortRange
	for p := uint16(1); p < 29; p += 2 {
		many = append(many, netpol.PortRange{Proto: netpol.TCP, First: p, Last: p})
	}
	many = append(many, netpol.PortRange{Proto: netpol.TCP, First: 29, Last: 40})
	if got := iptPorts(netpol.Allow{Ports: many}); len(got) != 2 || !strings.HasSuffix(got[1], "--dports 29:40 ") {
		t.Errorf("14 ports and a range are two multiport matches: %q", got)
	}
	empty := iptWrite(iptFamily{family.IPv6, "ip6tables-restore", "ip6tables", "inet6"}, r)
	if !strings.Contains(empty.rest, "--icmpv6-type 135 -j ACCEPT") || len(empty.setNames) != 0 {
		t.Errorf("IPv6 of an IPv4 world: %s %v", empty.rest, empty.setNames)
	}
}

func TestIptablesNeedsItsTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := iptablesProvider{}.Install(fakeLab("veth-routed", nil), &netpol.Rules{})
	if err == nil || err.Error() != "the iptables policy provider needs ipset, which is not installed (Debian: apt-get install ipset)" {
		t.Errorf("without ipset: %v", err)
	}
}
