package modes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// A private Open vSwitch: vnetlab's own ovsdb-server and ovs-vswitchd, both
// inside the node namespace, with every socket, database, pid and log file in
// the lab's state directory (never the system's /var/run/openvswitch). They
// are journaled daemons: down and clean stop them by PID.
//
// Datapath: the kernel one ("system") where the openvswitch module exists;
// otherwise the userspace one ("netdev"), where ovs-vswitchd itself moves
// every frame: veth ports are AF_PACKET sockets opened in vswitchd's network
// namespace (hence vswitchd runs in the node) and internal ports are TAP
// devices it creates.

// OVS datapath types (Bridge datapath_type).
const (
	DatapathKernel = "system"
	DatapathNetdev = "netdev"
)

// OVSSchema is the Open_vSwitch database schema shipped by openvswitch-common.
var OVSSchema = "/usr/share/openvswitch/vswitch.ovsschema"

var ovsPrograms = []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"}

// OVSInstalled says whether the Open vSwitch programs and schema are there.
func OVSInstalled() error {
	for _, p := range ovsPrograms {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is not installed: apt-get install openvswitch-switch", p)
		}
	}
	if _, err := os.Stat(OVSSchema); err != nil {
		return fmt.Errorf("Open vSwitch schema %s is missing: apt-get install openvswitch-common", OVSSchema)
	}
	return nil
}

// ChooseDatapath resolves the `datapath` option: auto picks the kernel
// datapath when the openvswitch module is there, else netdev.
func ChooseDatapath(opt string) (string, error) {
	kerr := kernel.Check(kernel.OVSDatapath)
	switch opt {
	case "", "auto":
		if kerr == nil {
			return DatapathKernel, nil
		}
		return DatapathNetdev, nil
	case DatapathNetdev:
		return DatapathNetdev, nil
	case DatapathKernel, "kernel":
		if kerr != nil {
			return "", fmt.Errorf("datapath=system: %v (use datapath=netdev or auto)", kerr)
		}
		return DatapathKernel, nil
	}
	return "", fmt.Errorf("option datapath=%q: want auto, system or netdev", opt)
}

// DatapathDetail is doctor's line about the datapath ovs modes will use.
func DatapathDetail() string {
	if err := kernel.Check(kernel.OVSDatapath); err != nil {
		return "datapath netdev (userspace ovs-vswitchd in the node namespace): no kernel datapath here (CONFIG_OPENVSWITCH)"
	}
	return "datapath system (kernel openvswitch module)"
}

// OVSSwitch is one running private Open vSwitch.
type OVSSwitch struct {
	NS       string // namespace both daemons live in
	Dir      string // private run/db/log directory
	Datapath string
	vswitchd *Daemon
}

// StartOVS starts ovsdb-server and ovs-vswitchd in namespace ns with their
// files under dir. userspaceTSO turns on OVS's userspace TSO (netdev only).
func StartOVS(env *Env, ns, dir, datapath string, userspaceTSO bool) (*OVSSwitch, error) {
	if err := OVSInstalled(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &OVSSwitch{NS: ns, Dir: dir, Datapath: datapath}
	// Daemons' stdout/stderr go beside their files (ovs/, ovs-node1/, ...).
	logDir, err := filepath.Rel(env.StateDir, dir)
	if err != nil {
		return nil, err
	}
	db := filepath.Join(dir, "conf.db")
	if _, err := s.command("ovsdb-tool", "create", db, OVSSchema).Output(); err != nil {
		return nil, fmt.Errorf("ovsdb-tool create: %w", err)
	}
	dbd, err := env.StartDaemon(s.command("ovsdb-server", db,
		"--remote=punix:"+s.path("db.sock"), "--unixctl="+s.path("ovsdb-server.ctl"),
		"--pidfile="+s.path("ovsdb-server.pid"), "--log-file="+s.path("ovsdb-server.log"),
		"-vsyslog:off", "-vconsole:err"), filepath.Join(logDir, "ovsdb-server.out"))
	if err != nil {
		return nil, err
	}
	// --retry: wait for ovsdb-server to listen (bounded by --timeout).
	if _, err := s.vsctl("--no-wait", "--retry", "init"); err != nil {
		return nil, fmt.Errorf("ovsdb-server did not come up: %w (log: %s)", err, dbd.LogTail())
	}
	if userspaceTSO {
		if _, err := s.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"); err != nil {
			return nil, err
		}
	}
	s.vswitchd, err = env.StartDaemon(s.command("ovs-vswitchd", "unix:"+s.path("db.sock"),
		"--unixctl="+s.path("ovs-vswitchd.ctl"), "--pidfile="+s.path("ovs-vswitchd.pid"),
		"--log-file="+s.path("ovs-vswitchd.log"), "-vsyslog:off", "-vconsole:err"), filepath.Join(logDir, "ovs-vswitchd.out"))
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *OVSSwitch) path(name string) string { return filepath.Join(s.Dir, name) }

// command runs an OVS program in the switch's namespace with every default
// path pointing at the private directory.
func (s *OVSSwitch) command(name string, args ...string) *proc.Cmd {
	c := proc.Command(context.Background(), s.NS, name, args...)
	c.Env = append(os.Environ(), "OVS_RUNDIR="+s.Dir, "OVS_DBDIR="+s.Dir, "OVS_LOGDIR="+s.Dir,
		"OVS_SYSCONFDIR="+s.Dir, "OVS_PKGDATADIR="+filepath.Dir(OVSSchema))
	return c
}

// Vsctl runs ovs-vsctl against this switch. Without --no-wait it returns
// once ovs-vswitchd has applied the change (ports exist).
func (s *OVSSwitch) Vsctl(args ...string) (string, error) {
	out, err := s.vsctl(args...)
	if err != nil && s.vswitchd != nil && s.vswitchd.Exited() {
		err = fmt.Errorf("%w; ovs-vswitchd exited: %s", err, s.vswitchd.LogTail())
	} else if err != nil && s.vswitchd != nil {
		err = fmt.Errorf("%w (see %s)", err, s.path("ovs-vswitchd.log"))
	}
	return out, err
}

func (s *OVSSwitch) vsctl(args ...string) (string, error) {
	all := append([]string{"--db=unix:" + s.path("db.sock"), "--timeout=15"}, args...)
	out, err := s.command("ovs-vsctl", all...).Output()
	if err != nil {
		return "", fmt.Errorf("ovs-vsctl %v: %w", args, err)
	}
	return string(out), nil
}

// AddBridge creates bridge name on the switch's datapath and returns its
// local port (an internal port in the switch's namespace, down).
func (s *OVSSwitch) AddBridge(env *Env, name string) (netlink.Link, error) {
	if _, err := s.Vsctl("add-br", name, "--", "set", "bridge", name, "datapath_type="+s.Datapath); err != nil {
		return nil, err
	}
	return waitLink(env.Node.H, name, 5*time.Second)
}

// waitLink waits for an interface ovs-vswitchd creates asynchronously.
func waitLink(h *netlink.Handle, name string, timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.LinkByName(name)
		if err == nil {
			return l, nil
		}
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) || time.Now().After(deadline) {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ovsOptions are the options both ovs modes take.
func ovsOptions() []Option {
	return []Option{
		{Name: "datapath", Default: "auto", Help: "auto (kernel if the openvswitch module exists, else netdev), system or netdev",
			Check: func(v string) error { _, err := ChooseDatapath(v); return err }},
		{Name: "userspace_tso", Default: "off", Help: "netdev only: on = OVS userspace TSO (64 KB segments through vswitchd, offloads left on); off = TX checksum offload off on veths (docs/labs.md)",
			Check: OnOff("userspace_tso")},
		{Name: "encap", Default: "none", Help: "with --nodes 2: none = the underlay eth1 is a port of ovsbr (one L2 segment); vxlan = an OVS vxlan port (VNI 1) to the other node, pods' MTU 1450 (seed 003's empty VXLAN rows)",
			Check: checkEncap},
	}
}

// ovsConfig is what the ovs options resolve to.
type ovsConfig struct {
	Datapath string
	TSO      bool // OVS userspace TSO (netdev only)
	Encap    string
}

// TxOff says whether the pods' veths need TX checksum offload off: on the
// netdev datapath, unless userspace TSO handles partial checksums.
func (c ovsConfig) TxOff() bool { return c.Datapath == DatapathNetdev && !c.TSO }

func ovsSettings(env *Env) (ovsConfig, error) {
	var c ovsConfig
	var err error
	if c.Datapath, err = ChooseDatapath(env.Option("datapath", "auto")); err != nil {
		return c, err
	}
	if c.TSO, err = env.BoolOption("userspace_tso", false); err != nil {
		return c, err
	}
	if c.TSO && c.Datapath != DatapathNetdev {
		return c, errors.New("option userspace_tso=on applies to the netdev datapath only: add datapath=netdev")
	}
	c.Encap = env.Option("encap", EncapNone)
	if err := checkEncap(c.Encap); err != nil {
		return c, err
	}
	if c.Encap != EncapNone && len(env.Nodes) < 2 {
		return c, fmt.Errorf("option encap=%s tunnels between nodes: add --nodes 2", c.Encap)
	}
	if c.Encap == EncapVxlan && c.TSO {
		// Measured with Open vSwitch 3.1: vswitchd logs "Tunneling packets
		// with HW offload flags is not supported: packet dropped" and TCP stalls.
		return c, errors.New("options userspace_tso=on and encap=vxlan do not go together: Open vSwitch's userspace tunnels drop TSO packets; drop one of them")
	}
	return c, nil
}

// ovsBridge is the shared start of the same-host ovs modes: a private
// switch on the node, bridge ovsbr whose local port holds the pods' gateway
// (.1, like br0 in seed 002's bridge mode), and the facts results record.
func ovsBridge(env *Env) (*OVSSwitch, ovsConfig, error) {
	c, err := ovsSettings(env)
	if err != nil {
		return nil, c, err
	}
	gw := &net.IPNet{IP: NthIP(env.PodNet, 1), Mask: env.PodNet.Mask}
	sw, err := ovsNodeBridge(env, filepath.Join(env.StateDir, "ovs"), c, gw, env.Prefix6(), 0)
	if err != nil {
		return nil, c, err
	}
	env.Gateway = gw.IP.String()
	env.Facts = map[string]string{"datapath": c.Datapath, "ovs_dir": sw.Dir, "userspace_tso": onOffWord(c.TSO)}
	return sw, c, nil
}

// ovsNodeBridge starts a private switch in env.Node with its files in dir
// and adds bridge ovsbr, its local port up with address gw (and MTU mtu if
// not 0), routing on. With IPv6 the local port also holds ::1 of env's IPv6
// pod network with prefix6 (the whole lab's across nodes, as gw's mask).
func ovsNodeBridge(env *Env, dir string, c ovsConfig, gw *net.IPNet, prefix6, mtu int) (*OVSSwitch, error) {
	sw, err := StartOVS(env, env.Node.Name, dir, c.Datapath, c.TSO)
	if err != nil {
		return nil, err
	}
	br, err := sw.AddBridge(env, "ovsbr")
	if err != nil {
		return nil, err
	}
	if mtu != 0 {
		// Through OVS, which otherwise resets a local port's MTU to its ports' minimum.
		if _, err := sw.Vsctl("set", "interface", "ovsbr", fmt.Sprintf("mtu_request=%d", mtu)); err != nil {
			return nil, err
		}
	}
	if err := env.Node.H.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil {
		return nil, fmt.Errorf("gateway %s on ovsbr: %w", gw.IP, err)
	}
	if err := env.Node.H.LinkSetUp(br); err != nil {
		return nil, err
	}
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return nil, err
	}
	if env.HasIPv6() { // OVS switches by MAC: IPv6 needs only the gateway and forwarding
		if err := bridgeGateway6(env, br, prefix6); err != nil {
			return nil, err
		}
		if err := Forwarding6(env.Node.Name); err != nil {
			return nil, err
		}
	}
	return sw, nil
}

// ovsPodAddrs gives a pod on ovsbr its IPv4 address and default route via
// gw, and its IPv6 ones via the local port's IPv6 gateway.
func ovsPodAddrs(env *Env, pod *Pod, gw net.IP) error {
	if err := PodAddr(pod, env.Prefix(), gw, false); err != nil {
		return err
	}
	if pod.IP6 == nil {
		return nil
	}
	return bridgePod6(env, pod)
}
