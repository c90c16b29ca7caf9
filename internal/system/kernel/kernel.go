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

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
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
	Netkit      Feature = "netkit"
	// IPv6: new namespaces carry IPv6 (labs of --ip-family ipv6 or dual).
	IPv6 Feature = "ipv6"
	// SCTP: the kernel speaks SCTP (a NetworkPolicy port may name it).
	SCTP Feature = "sctp"
)

// config names the kernel option behind each feature, for error messages.
var config = map[Feature]string{
	Veth: "CONFIG_VETH", Bridge: "CONFIG_BRIDGE", BrNetfilter: "CONFIG_BRIDGE_NETFILTER",
	Macvlan: "CONFIG_MACVLAN", Ipvlan: "CONFIG_IPVLAN", Vxlan: "CONFIG_VXLAN",
	Tun: "CONFIG_TUN", OVSDatapath: "CONFIG_OPENVSWITCH", Nftables: "CONFIG_NF_TABLES",
	Netkit: "CONFIG_NETKIT, kernel 6.7+", IPv6: "CONFIG_IPV6", SCTP: "CONFIG_IP_SCTP",
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
		results[Bridge] = wrap(Bridge, netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probebr"}}))
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
			results[BrNetfilter] = brNetfilterMissing()
		} else {
			results[BrNetfilter] = nil
		}
		// macvlan and ipvlan each get a parent of their own: a device that
		// has macvlan children cannot take ipvlan ones ("device or resource
		// busy"), which is no sign of a kernel without ipvlan.
		results[Macvlan] = probeChild(Macvlan, "probe0", func(idx int) netlink.Link {
			return &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "probemv", ParentIndex: idx}, Mode: netlink.MACVLAN_MODE_BRIDGE}
		})
		_ = netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe2"}, PeerName: "probe3"})
		results[Ipvlan] = probeChild(Ipvlan, "probe2", func(idx int) netlink.Link {
			return &netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "probeipv", ParentIndex: idx}, Mode: netlink.IPVLAN_MODE_L2}
		})
		results[Vxlan] = wrap(Vxlan, netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "probevx"}, VxlanId: 42, Port: 4789}))
		results[Tun] = wrap(Tun, netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: "probetap"}, Mode: netlink.TUNTAP_MODE_TAP}))
		if _, err := netlink.GenlFamilyGet("ovs_datapath"); err != nil {
			results[OVSDatapath] = missing(OVSDatapath, errors.New("no ovs_datapath generic netlink family"))
		} else {
			results[OVSDatapath] = nil
		}
		results[Nftables] = probeNftables()
		nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: "probenk0"}, Mode: netlink.NETKIT_MODE_L3}
		nk.SetPeerAttrs(&netlink.LinkAttrs{Name: "probenk1"})
		results[Netkit] = wrap(Netkit, netlink.LinkAdd(nk))
		results[IPv6] = ipv6Disabled("/proc/sys") // this scratch namespace's view, as a lab's
		results[SCTP] = probeSCTP()
		return nil
	})
}

// brNetfilterMissing says why the bridge netfilter sysctls are absent: a
// kernel without it, or a module not loaded (stock kernels build it as one;
// Docker and kube-proxy setups load it). vnetlab does not load it: that
// would send the machine's own bridged traffic through its iptables.
func brNetfilterMissing() error {
	var u unix.Utsname
	_ = unix.Uname(&u)
	dep, _ := os.ReadFile("/lib/modules/" + unix.ByteSliceToString(u.Release[:]) + "/modules.dep")
	if strings.Contains(string(dep), "/br_netfilter.ko") {
		return fmt.Errorf("the br_netfilter module is not loaded (no net.bridge.bridge-nf-call-iptables sysctl): load it with modprobe br_netfilter, as Docker and Kubernetes hosts do")
	}
	return missing(BrNetfilter, errors.New("no net.bridge.bridge-nf-call-iptables sysctl"))
}

// probeChild adds a child link of the named parent veth.
func probeChild(f Feature, parentName string, child func(parent int) netlink.Link) error {
	parent, err := netlink.LinkByName(parentName)
	if err != nil {
		return missing(f, errors.New("no veth to use as parent"))
	}
	return wrap(f, netlink.LinkAdd(child(parent.Attrs().Index)))
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

// probeSCTP opens an SCTP socket: a kernel without SCTP refuses the protocol.
func probeSCTP() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
		return missing(SCTP, err)
	}
	if err != nil {
		return fmt.Errorf("sctp probe failed: %w", err)
	}
	unix.Close(fd)
	return nil
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
