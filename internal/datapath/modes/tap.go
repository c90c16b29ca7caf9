package modes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/tapswitch"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// tap-naive and tap-offload: seed 000's "tun/tap"
// and its qemu-kvm bridge picture: a VM's NIC is a TAP whose other end is a
// user process (qemu) reading and writing /dev/net/tun, and VMs meet on a
// bridge. Here each pod's eth0 is a TAP (the pod plays the guest kernel) and
// vnetlab's own process, `vnetlab tap-switch`, plays qemu plus the bridge:
// every frame between pods is read from one TAP and written to another.
// A third port, tap-gw in the node, holds the pods' gateway .1.
//
// Like libvirt, vnetlab opens the TAPs itself (each in its pod's namespace:
// a new TAP lands in its creator's namespace), configures them, and passes
// the descriptors to the switch, started in the node namespace. The TAPs are
// not persistent: they vanish with the switch's descriptors, as a VM's TAP
// vanishes with qemu.
//
//   - tap-naive: seed 000's C program: plain IFF_TAP|IFF_NO_PI, one frame
//     of a 1500-byte MTU per read() and per write(); the pods' stacks
//     segment and checksum every packet themselves.
//   - tap-offload: what qemu does with virtio-net: IFF_VNET_HDR,
//     TUNSETVNETHDRSZ 12, TUNSETOFFLOAD(CSUM|TSO4|TSO6): a TCP frame of up
//     to 64 KB with a partial checksum crosses per system call, its
//     virtio_net_hdr passed through unchanged.
func init() {
	Register(Mode{
		Name:     TapNaive,
		Seeds:    []Seed{SeedInterfaces},
		Summary:  "TAP per pod + vnetlab's userspace switch, one 1500-MTU frame per read/write (seed 000's tun program)",
		Requires: []kernel.Feature{kernel.Tun},
		Usable:   tapUsable,
		Build:    tapMode{offload: false}.build,
		IPv6:     true,
		Links: Links{MaxMTU: tapswitch.NaiveFrame - 18,
			MaxMTUWhy: fmt.Sprintf("tap-naive's switch copies one frame of at most %d bytes per read (seed 000's program): a larger MTU would cut frames", tapswitch.NaiveFrame)},
	})
	Register(Mode{
		Name:     TapOffload,
		Seeds:    []Seed{SeedInterfaces, SeedBridgeOVS},
		Summary:  "TAP per pod + vnetlab's userspace switch, IFF_VNET_HDR + TSO: 64 KB frames per syscall (seed 000, qemu virtio-net)",
		Requires: []kernel.Feature{kernel.Tun},
		Usable:   tapUsable,
		Build:    tapMode{offload: true}.build,
		IPv6:     true,
	})
}

// tapMode is what the two tap modes' builds differ by.
type tapMode struct{ offload bool }

// TapGateway is the node's port on the tap switch, holding the gateway.
const TapGateway = "tap-gw"

func tapUsable() error {
	_, err := TapSwitchBinary()
	return err
}

// TapSwitchBinary is the program started as `PROGRAM tap-switch`:
// $VNETLAB_BIN if set, else the running vnetlab.
func TapSwitchBinary() (string, error) {
	if b := os.Getenv("VNETLAB_BIN"); b != "" {
		return b, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(exe, ".test") {
		return "", errors.New("the tap modes start `vnetlab tap-switch` and this is a Go test binary: set VNETLAB_BIN to a built vnetlab (make build)")
	}
	return exe, nil
}

func (m tapMode) build(env *Env) error {
	exe, err := TapSwitchBinary()
	if err != nil {
		return err
	}
	gw := NthIP(env.PodNet, 1)
	var files []*os.File
	defer func() {
		// The switch has its own copies; ours go, so the TAPs live exactly
		// as long as the switch (or vanish now if it never started).
		for _, f := range files {
			f.Close()
		}
	}()
	var ports []string
	open := func(ns, ifname, who string) error {
		var fd int
		err := nsutil.Do(ns, func() (err error) {
			fd, err = tapswitch.OpenTap(ifname, m.offload)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		files = append(files, os.NewFile(uintptr(fd), who+"/"+ifname))
		ports = append(ports, who+"/"+ifname)
		return nil
	}
	for _, pod := range env.Pods {
		if err := open(pod.Name, pod.Ifname, pod.Pod); err != nil {
			return err
		}
		if err := PodAddr(pod, env.Prefix(), gw, false); err != nil {
			return err
		}
		if pod.IP6 != nil {
			if err := nodeGatewayPod6(env, pod); err != nil {
				return err
			}
		}
	}
	if err := open(env.Node.Name, TapGateway, "node"); err != nil {
		return err
	}
	l, err := env.Node.H.LinkByName(TapGateway)
	if err != nil {
		return err
	}
	if err := env.Node.H.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: env.PodNet.Mask}}); err != nil {
		return fmt.Errorf("gateway %s on %s: %w", gw, TapGateway, err)
	}
	if err := env.Node.H.LinkSetUp(l); err != nil {
		return err
	}
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if env.HasIPv6() { // the switch is L2: NDP floods as ARP does, nothing else differs
		if err := nodeGateway6(env, l); err != nil {
			return err
		}
	}
	args := []string{"tap-switch"}
	for _, p := range ports {
		args = append(args, "--port", p)
	}
	if m.offload {
		args = append(args, "--vnet-hdr", strconv.Itoa(tapswitch.VnetHdrLen))
	}
	c := proc.Command(context.Background(), env.Node.Name, exe, args...)
	c.ExtraFiles = files
	d, err := env.StartDaemon(c, "tap-switch.log")
	if err != nil {
		return err
	}
	env.Gateway = gw.String()
	env.Facts = map[string]string{"forwarder": fmt.Sprintf("vnetlab tap-switch pid %d (userspace L2 switch, node namespace)", d.Cmd.Process.Pid)}
	if m.offload {
		env.Facts["tap"] = "IFF_VNET_HDR (12 B header) + TUNSETOFFLOAD csum,tso4,tso6: up to 64 KB per read/write"
	} else {
		env.Facts["tap"] = fmt.Sprintf("IFF_TAP|IFF_NO_PI, no offloads: one frame (<= %d B) per read/write", tapswitch.NaiveFrame)
	}
	return nil
}
