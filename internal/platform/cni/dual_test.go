package cni

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

const rigSubnet6 = "fd00:77:1::/64"

// dualRanges is host-local's ranges for dual-stack pods: one range set of
// each family.
var dualRanges = fmt.Sprintf(`[[{"subnet": %q}], [{"subnet": %q}]]`, rigSubnet, rigSubnet6)

// Dual-stack pods by each mode with IPv6 wiring: the result lists an
// address and a default route of each family, the pods reach each other
// and the node reaches them over both, CHECK passes and then notices a
// missing IPv6 address, DEL leaves nothing of either family.
func TestAddCheckDelDualStack(t *testing.T) {
	for _, mode := range []string{modes.VethRouted, modes.VethEBPF, modes.Bridge} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t, mode, "")
			r.ranges = dualRanges
			a, b, ra, rb := r.addTwo()
			for who, res := range map[string][]string{"a": resultText(ra), "b": resultText(rb)} {
				if len(res) != 4 || !strings.HasPrefix(res[0], "10.77.1.") || !strings.HasPrefix(res[1], "fd00:77:1::") ||
					res[2] != "0.0.0.0/0" || res[3] != "::/0" {
					t.Fatalf("pod %s's result: %v, want an address of %s and of %s, then default routes 0.0.0.0/0 and ::/0", who, res, rigSubnet, rigSubnet6)
				}
			}
			if ra.IPs[1].Gateway == nil || rb.Routes[1].GW == nil {
				t.Errorf("IPv6 gateway missing from the result: %v, %v", ra.IPs[1], rb.Routes[1])
			}
			for _, to := range []struct {
				from string
				ip   net.IP
			}{{a, rb.IPs[0].Address.IP}, {a, rb.IPs[1].Address.IP}, {r.node, ra.IPs[0].Address.IP}, {r.node, ra.IPs[1].Address.IP}} {
				if err := ping(to.from, to.ip); err != nil {
					t.Errorf("%s -> %s: %v", to.from, to.ip, err)
				}
			}
			if err := r.cni.CheckNetwork(context.Background(), r.netconf(), rt("ctr-a", a)); err != nil {
				t.Errorf("CHECK of a healthy dual-stack pod: %v", err)
			}
			// CHECK checks the IPv6 side too: pod b loses its IPv6 address.
			h, err := nsutil.Handle(b)
			if err != nil {
				t.Fatal(err)
			}
			l, err := h.LinkByName("eth0")
			if err == nil {
				err = h.AddrDel(l, &netlink.Addr{IPNet: &rb.IPs[1].Address})
			}
			h.Close()
			if err != nil {
				t.Fatal(err)
			}
			err = r.cni.CheckNetwork(context.Background(), r.netconf(), rt("ctr-b", b))
			if err == nil || !strings.Contains(err.Error(), rb.IPs[1].Address.IP.String()) {
				t.Errorf("CHECK without the pod's IPv6 address: want an error naming %s, got %v", rb.IPs[1].Address.IP, err)
			}
			for _, who := range [][2]string{{"ctr-a", a}, {"ctr-b", b}} {
				if err := r.del(who[0], who[1]); err != nil {
					t.Errorf("DEL %s: %v", who[0], err)
				}
			}
			r.assertClean("after DEL")
		})
	}
}

// resultText is a result's addresses and routes' destinations, in order.
func resultText(r *types100.Result) []string {
	var out []string
	for _, ip := range r.IPs {
		out = append(out, ip.Address.IP.String())
	}
	for _, rt := range r.Routes {
		out = append(out, rt.Dst.String())
	}
	return out
}

// Every mode refuses an IPv6-only pod (every mode of the CNI wires IPv6
// since veth-ebpf does: takeAddress's refusal of a dual-stack pod in a mode
// without it has no mode to test here), each with one line naming the fix; nothing stays.
func TestDualStackRefused(t *testing.T) {
	for _, c := range []struct{ mode, ranges, want string }{
		{modes.VethRouted, fmt.Sprintf(`[[{"subnet": %q}]]`, rigSubnet6), "add an IPv4 range"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			r := newRig(t, c.mode, "")
			r.ranges = c.ranges
			a := r.newNS(r.node[:len(r.node)-4] + "pa")
			_, err := r.add("ctr-a", a)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("ADD: want one line saying %q, got %v", c.want, err)
			}
			r.assertClean("after a refused ADD")
		})
	}
}
