// Package kernel probes what this kernel can do, in throwaway namespaces, so
// that vnetlab can say exactly which mode is unavailable and why.
package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// Feature names a kernel capability a mode may need.
type Feature string

const (
	Veth        Feature = "veth"
	Bridge      Feature = "bridge"
	BrNetfilter Feature = "br_netfilter"
	Macvlan     Feature = "macvlan"
	Ipvlan      Feature = "ipvlan"
	Vxlan       Feature = "vxlan"
	Tun         Feature = "tun"
	OVSDatapath Feature = "openvswitch"
	Nftables    Feature = "nf_tables"
)

// config names the kernel option behind each feature, for error messages.
var config = map[Feature]string{
	Veth: "CONFIG_VETH", Bridge: "CONFIG_BRIDGE", BrNetfilter: "CONFIG_BRIDGE_NETFILTER",
	Macvlan: "CONFIG_MACVLAN", Ipvlan: "CONFIG_IPVLAN", Vxlan: "CONFIG_VXLAN",
	Tun: "CONFIG_TUN", OVSDatapath: "CONFIG_OPENVSWITCH", Nftables: "CONFIG_NF_TABLES",
}

var (
	once    sync.Once
	results map[Feature]error
)

// Check returns nil when the feature works, or an error saying why not.
func Check(f Feature) error {
	once.Do(probeAll)
	err, ok := results[f]
	if !ok {
		return fmt.Errorf("unknown kernel feature %q", f)
	}
	return err
}

func missing(f Feature, cause error) error {
	name := strings.ReplaceAll(string(f), "_", " ")
	if f == OVSDatapath {
		name = "Open vSwitch datapath"
	}
	return missingError{fmt.Sprintf("kernel has no %s support (%s): %v", name, config[f], cause)}
}

// missingError says the kernel lacks a feature (as opposed to a probe that
// failed for another reason).
type missingError struct{ msg string }

func (e missingError) Error() string { return e.msg }

func isMissing(err error) bool { return errors.As(err, &missingError{}) }

func probeAll() {
	results = map[Feature]error{}
	_ = nsutil.Scratch(func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}, PeerName: "probe1"}
		results[Veth] = wrap(Veth, netlink.LinkAdd(veth))
		parent, _ := netlink.LinkByName("probe0")
		results[Bridge] = wrap(Bridge, netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probebr"}}))
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
			results[BrNetfilter] = missing(BrNetfilter, errors.New("no net.bridge.bridge-nf-call-iptables sysctl"))
		} else {
			results[BrNetfilter] = nil
		}
		if parent == nil {
			results[Macvlan] = missing(Macvlan, errors.New("no veth to use as parent"))
			results[Ipvlan] = results[Macvlan]
		} else {
			idx := parent.Attrs().Index
			results[Macvlan] = wrap(Macvlan, netlink.LinkAdd(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "probemv", ParentIndex: idx}, Mode: netlink.MACVLAN_MODE_BRIDGE}))
			results[Ipvlan] = wrap(Ipvlan, netlink.LinkAdd(&netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "probeipv", ParentIndex: idx}, Mode: netlink.IPVLAN_MODE_L2}))
		}
		results[Vxlan] = wrap(Vxlan, netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "probevx"}, VxlanId: 42, Port: 4789}))
		results[Tun] = wrap(Tun, netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "probetap"}, Mode: netlink.TUNTAP_MODE_TAP}))
		if _, err := netlink.GenlFamilyGet("ovs_datapath"); err != nil {
			results[OVSDatapath] = missing(OVSDatapath, errors.New("no ovs_datapath generic netlink family"))
		} else {
			results[OVSDatapath] = nil
		}
		results[Nftables] = probeNftables()
		return nil
	})
}

func wrap(f Feature, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return missing(f, err)
	}
	return fmt.Errorf("%s probe failed: %w", f, err)
}

// probeNftables checks the nf_tables netlink subsystem answers (it is what
// both iptables-nft and nft use).
func probeNftables() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER)
	if err != nil {
		return missing(Nftables, err)
	}
	unix.Close(fd)
	return nil
}
