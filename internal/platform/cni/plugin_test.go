package cni

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// The plugin under test is this test binary: run with CNI_COMMAND set (by
// libcni, through a link named vnetlab-cni), TestMain hands it to Main.
const noRollbackEnv = "VNETLAB_CNI_TEST_NO_ROLLBACK"

func TestMain(m *testing.M) {
	if os.Getenv("CNI_COMMAND") != "" {
		noRollback = os.Getenv(noRollbackEnv) == "1"
		Main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rig is a node namespace and a CNI runtime (libcni) calling the plugin.
type rig struct {
	t             *testing.T
	node, plane   string
	bin, ipamDir  string
	cni           *libcni.CNIConfig
	mode, options string
	nodeH         *netlink.Handle
	// ranges is host-local's "ranges" ("": one IPv4 range, rigSubnet).
	ranges string
}

const rigSubnet = "10.77.1.0/24"

func newRig(t *testing.T, mode, options string) *rig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the plugin wires real namespaces: needs root")
	}
	if _, err := os.Stat("/usr/lib/cni/host-local"); err != nil {
		t.Skip("needs host-local (Debian package containernetworking-plugins)")
	}
	m, err := modes.Get(mode)
	if err != nil {
		t.Fatal(err)
	}
	if err := modes.Available(m); err != nil {
		t.Skipf("mode %s: %v", mode, err)
	}
	id := fmt.Sprintf("%d", time.Now().UnixNano()%1e8)
	r := &rig{t: t, node: "vnl-cnit" + id + "-node", plane: "cnit" + id, mode: mode, options: options}
	dir := t.TempDir()
	r.bin, r.ipamDir = filepath.Join(dir, "bin"), filepath.Join(dir, "ipam")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(r.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(r.bin, BinaryName)); err != nil {
		t.Fatal(err)
	}
	r.cni = libcni.NewCNIConfigWithCacheDir([]string{r.bin, "/usr/lib/cni"}, filepath.Join(dir, "cache"), nil)
	r.newNS(r.node)
	if r.nodeH, err = nsutil.Handle(r.node); err != nil {
		t.Fatal(err)
	}
	// The node's own address and default route (a real node's eth0): the
	// source of its packets to pods, and what proxy_arp needs to answer
	// for the pods' gateway (docs/labs.md).
	up := upVeth(t, r.nodeH, "eth0")
	if err := r.nodeH.AddrAdd(up, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 76, 0, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := r.nodeH.RouteAdd(&netlink.Route{LinkIndex: up.Attrs().Index, Gw: net.IPv4(10, 76, 0, 254)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.nodeH.Close()
		if err := tcbpf.Remove(r.plane); err != nil {
			t.Error(err)
		}
	})
	return r
}

// newNS creates a namespace removed when the test ends.
func (r *rig) newNS(name string) string {
	r.t.Helper()
	if err := nsutil.Create(name, "vnetlab cni test"); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		if err := nsutil.Delete(name); err != nil {
			r.t.Error(err)
		}
	})
	return name
}

func (r *rig) conf(extra string) []byte {
	ranges := r.ranges
	if ranges == "" {
		ranges = fmt.Sprintf(`[[{"subnet": %q}]]`, rigSubnet)
	}
	return []byte(fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "cnitest", "type": %q, "mode": %q, "nodeNetns": %q, "plane": %q,
  "stateDir": %q, %s "ipam": {"type": "host-local", "dataDir": %q, "ranges": %s}}`,
		BinaryName, r.mode, r.node, r.plane, filepath.Join(r.ipamDir, "..", "state"), extra, r.ipamDir, ranges))
}

func (r *rig) netconf() *libcni.NetworkConfig {
	extra := ""
	if r.options != "" {
		extra = `"options": ` + r.options + ","
	}
	c, err := libcni.ConfFromBytes(r.conf(extra))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func rt(id, netns string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: nsutil.Path(netns), IfName: "eth0"}
}

func (r *rig) add(id, netns string) (*types100.Result, error) {
	res, err := r.cni.AddNetwork(context.Background(), r.netconf(), rt(id, netns))
	if err != nil {
		return nil, err
	}
	return types100.NewResultFromResult(res)
}

func (r *rig) del(id, netns string) error {
	return r.cni.DelNetwork(context.Background(), r.netconf(), rt(id, netns))
}

// ourLinks lists the node's links the plugin named.
func (r *rig) ourLinks() []string {
	ls, err := r.nodeH.LinkList()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		if ours(l) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// allocations lists the addresses host-local has handed out.
func (r *rig) allocations() []string {
	ents, _ := os.ReadDir(filepath.Join(r.ipamDir, "cnitest"))
	var out []string
	for _, e := range ents {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// assertClean fails unless the plugin left nothing: links, addresses, eBPF
// endpoints and routes.
func (r *rig) assertClean(what string) {
	r.t.Helper()
	if l := r.ourLinks(); len(l) > 0 {
		r.t.Errorf("%s: links left in the node: %v", what, l)
	}
	if a := r.allocations(); len(a) > 0 {
		r.t.Errorf("%s: addresses still allocated: %v", what, a)
	}
	if _, err := os.Stat(tcbpf.PinDir(r.plane)); err == nil {
		dp, err := tcbpf.Open(r.plane)
		if err != nil {
			r.t.Fatal(err)
		}
		defer dp.Close()
		eps, _ := dp.ListEndpoints()
		routes, _ := dp.Routes()
		if len(eps) > 0 || len(routes) > 0 {
			r.t.Errorf("%s: eBPF endpoints %v and routes %v left", what, eps, routes)
		}
	}
}

// run runs the plugin with only CNI_COMMAND and CNI_PATH set (GC and
// STATUS concern no container).
func (r *rig) run(command, conf string) (string, error) {
	c := exec.Command(filepath.Join(r.bin, BinaryName))
	c.Env = []string{"CNI_COMMAND=" + command, "CNI_PATH=" + r.bin + ":/usr/lib/cni"}
	c.Stdin = strings.NewReader(conf)
	out, err := c.CombinedOutput()
	return string(out), err
}

// addTwo makes two pod namespaces, pa and pb, and ADDs them as containers
// ctr-a and ctr-b.
func (r *rig) addTwo() (a, b string, ra, rb *types100.Result) {
	r.t.Helper()
	a, b = r.newNS(r.node[:len(r.node)-4]+"pa"), r.newNS(r.node[:len(r.node)-4]+"pb")
	ra, err := r.add("ctr-a", a)
	if err != nil {
		r.t.Fatalf("ADD a: %v", err)
	}
	rb, err = r.add("ctr-b", b)
	if err != nil {
		r.t.Fatalf("ADD b: %v", err)
	}
	return a, b, ra, rb
}

// ping sends one echo request to ip (IPv4 or IPv6) from namespace ns.
func ping(ns string, ip net.IP) error {
	_, err := proc.Command(context.Background(), ns, "ping", "-c1", "-W3", ip.String()).Output()
	return err
}

func cniCode(t *testing.T, err error) *types.Error {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) {
		t.Fatalf("want a CNI error, got %T %v", err, err)
	}
	return te
}

// Two pods on one node by each mode: addresses, pod-to-pod and node-to-pod
// traffic, CHECK, CHECK noticing a broken link, DEL, and a repeated DEL.
func TestAddCheckDel(t *testing.T) {
	for _, mode := range []string{modes.VethRouted, modes.VethEBPF, modes.Bridge} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t, mode, "")
			a, b, ra, rb := r.addTwo()
			ipA, ipB := ra.IPs[0].Address.IP, rb.IPs[0].Address.IP
			if !mustCIDR(rigSubnet).Contains(ipA) || ipA.Equal(ipB) {
				t.Fatalf("addresses %s and %s: want two of %s", ipA, ipB, rigSubnet)
			}
			if len(ra.Interfaces) != 2 || ra.Interfaces[1].Sandbox != nsutil.Path(a) || ra.Interfaces[0].Name != HostIfname("ctr-a", "eth0") {
				t.Errorf("result interfaces: %+v", ra.Interfaces)
			}
			if err := ping(a, ipB); err != nil {
				t.Errorf("pod a -> pod b %s: %v", ipB, err)
			}
			if err := ping(r.node, ipA); err != nil {
				t.Errorf("node -> pod a %s: %v", ipA, err)
			}
			if err := r.cni.CheckNetwork(context.Background(), r.netconf(), rt("ctr-a", a)); err != nil {
				t.Errorf("CHECK of a healthy pod: %v", err)
			}
			host, err := r.nodeH.LinkByName(HostIfname("ctr-b", "eth0"))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.nodeH.LinkSetDown(host); err != nil {
				t.Fatal(err)
			}
			err = r.cni.CheckNetwork(context.Background(), r.netconf(), rt("ctr-b", b))
			if err == nil || !strings.Contains(err.Error(), "down") {
				t.Errorf("CHECK with the node end down: want an error saying so, got %v", err)
			}
			for _, who := range [][2]string{{"ctr-a", a}, {"ctr-b", b}} {
				if err := r.del(who[0], who[1]); err != nil {
					t.Errorf("DEL %s: %v", who[0], err)
				}
				if err := r.del(who[0], who[1]); err != nil {
					t.Errorf("repeated DEL %s: %v", who[0], err)
				}
			}
			r.assertClean("after DEL")
			if l, err := nsutil.Handle(a); err == nil {
				if _, err := l.LinkByName("eth0"); err == nil {
					t.Error("pod a still has eth0 after DEL")
				}
				l.Close()
			}
		})
	}
}

// blockDefaultRoute gives a pod a default route already, so that the
// mode's own default route fails after its link and address exist: an ADD
// failing half-way.
func blockDefaultRoute(t *testing.T, pod string) {
	t.Helper()
	h, err := nsutil.Handle(pod)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := upVeth(t, h, "blocker")
	if err := h.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Scope: netlink.SCOPE_LINK, Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}}); err != nil {
		t.Fatal(err)
	}
}

// upVeth adds a veth pair named name and name+"p" to a namespace (no dummy
// driver on this kernel) and sets name up.
func upVeth(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatal(err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// An ADD failing half-way returns a CNI error and rolls back; an ADD
// killed half-way (no rollback) leaves a half-wired pod that DEL, and a
// repeated DEL, clean up.
func TestFailedAdd(t *testing.T) {
	for _, mode := range []string{modes.VethRouted, modes.VethEBPF, modes.Bridge} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t, mode, "")
			pod := r.newNS(r.node[:len(r.node)-4] + "pf")
			blockDefaultRoute(t, pod)
			_, err := r.add("ctr-f", pod)
			if err == nil {
				t.Fatal("ADD into a pod that has a default route already: want an error")
			}
			if te := cniCode(t, err); te.Code != types.ErrInternal || !strings.Contains(te.Msg, "default route") {
				t.Errorf("error %d %q: want code %d naming the default route", te.Code, te.Msg, types.ErrInternal)
			}
			r.assertClean("after a failed ADD")

			t.Setenv(noRollbackEnv, "1")
			if _, err := r.add("ctr-f", pod); err == nil {
				t.Fatal("second ADD: want an error")
			}
			if len(r.ourLinks()) == 0 || len(r.allocations()) == 0 {
				t.Fatalf("an ADD killed half-way should leave its link and address for DEL to find (links %v, addresses %v)", r.ourLinks(), r.allocations())
			}
			t.Setenv(noRollbackEnv, "0")
			for i := range 2 {
				if err := r.del("ctr-f", pod); err != nil {
					t.Errorf("DEL %d after a half-done ADD: %v", i+1, err)
				}
			}
			r.assertClean("after DEL of a half-done ADD")
		})
	}
}

// Bad configurations get a CNI error naming the field, and nothing is made.
func TestBadConfig(t *testing.T) {
	r := newRig(t, modes.VethRouted, "")
	pod := r.newNS(r.node[:len(r.node)-4] + "pc")
	args := &invoke.Args{Command: "ADD", ContainerID: "ctr-c", NetNS: nsutil.Path(pod), IfName: "eth0", Path: r.bin + ":/usr/lib/cni"}
	plugin := filepath.Join(r.bin, BinaryName)
	for _, c := range []struct {
		name, conf, want string
		code             uint
	}{
		{"not JSON", `{"cniVersion": "1.0.0", "mode": `, "unmarshal", types.ErrDecodingFailure},
		{"unknown mode", string(r.conf(`"mode": "warp-drive",`)), `"mode": "warp-drive" is not a mode`, types.ErrInvalidNetworkConfig},
		{"no mode", strings.Replace(string(r.conf("")), `"mode": "veth-routed",`, "", 1), `"mode": missing`, types.ErrInvalidNetworkConfig},
		{"unknown option", string(r.conf(`"options": {"warp": "on"},`)), `"options.warp"`, types.ErrInvalidNetworkConfig},
		{"bad option value", strings.Replace(string(r.conf(`"options": {"bridge_nf_call_iptables": "maybe"},`)), `"veth-routed"`, `"bridge"`, 1), `"options.bridge_nf_call_iptables"`, types.ErrInvalidNetworkConfig},
		{"no ipam", strings.Replace(string(r.conf("")), `"type": "host-local"`, `"type": ""`, 1), `"ipam.type"`, types.ErrInvalidNetworkConfig},
		{"bad mtu", string(r.conf(`"mtu": 12,`)), `"mtu"`, types.ErrInvalidNetworkConfig},
		{"missing node", strings.Replace(string(r.conf("")), r.node, "vnl-cnit-no-such-node", 1), `"nodeNetns"`, types.ErrInvalidNetworkConfig},
	} {
		_, err := invoke.ExecPluginWithResult(context.Background(), plugin, []byte(c.conf), args, nil)
		if err == nil {
			t.Errorf("%s: ADD succeeded", c.name)
			continue
		}
		te := cniCode(t, err)
		if te.Code != c.code || !strings.Contains(te.Msg, c.want) {
			t.Errorf("%s: error %d %q: want code %d containing %q", c.name, te.Code, te.Msg, c.code, c.want)
		}
	}
	r.assertClean("after bad configurations")
	h, err := nsutil.Handle(pod)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if ls, _ := h.LinkList(); len(ls) != 1 {
		t.Errorf("the pod has %d links after refused ADDs, want only lo", len(ls))
	}
}

// GC (CNI 1.1) removes the links of attachments that are no longer valid.
func TestGC(t *testing.T) {
	r := newRig(t, modes.VethRouted, "")
	a, b := r.newNS(r.node[:len(r.node)-4]+"ga"), r.newNS(r.node[:len(r.node)-4]+"gb")
	for _, p := range [][2]string{{"ctr-a", a}, {"ctr-b", b}} {
		if _, err := r.add(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	// What a 1.1 runtime sends: the configuration with the attachments it
	// still knows.
	conf := strings.Replace(string(r.conf(`"cni.dev/valid-attachments": [{"containerID": "ctr-a", "ifname": "eth0"}],`)), `"1.0.0"`, `"1.1.0"`, 1)
	if out, err := r.run("GC", conf); err != nil {
		t.Fatalf("GC: %v: %s", err, out)
	}
	if got := r.ourLinks(); len(got) != 1 || got[0] != HostIfname("ctr-a", "eth0") {
		t.Errorf("after GC keeping ctr-a: links %v, want only %s", got, HostIfname("ctr-a", "eth0"))
	}
	if out, err := r.run("STATUS", conf); err != nil {
		t.Errorf("STATUS: %v: %s", err, out)
	}
	for _, p := range [][2]string{{"ctr-a", a}, {"ctr-b", b}} {
		if err := r.del(p[0], p[1]); err != nil {
			t.Error(err)
		}
	}
	r.assertClean("after GC and DEL")
}

func mustCIDR(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

// What cnitool does, through libcni with one 1.1.0 configuration list:
// ADD two pods in veth-ebpf mode, GC keeping both, DEL both, GC. The
// node's eBPF plane stays while an attachment or another process uses it,
// the last DEL says in the plugin's log that it leaves the plane for GC,
// and the last GC removes it.
func TestGCCollectsPlane(t *testing.T) {
	r := newRig(t, modes.VethEBPF, "")
	a, b := r.newNS(r.node[:len(r.node)-4]+"ca"), r.newNS(r.node[:len(r.node)-4]+"cb")
	var log bytes.Buffer
	cni := libcni.NewCNIConfigWithCacheDir([]string{r.bin, "/usr/lib/cni"}, filepath.Join(t.TempDir(), "cache"),
		&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: &log}, PluginDecoder: version.PluginDecoder{}})
	plugin := strings.Replace(string(r.conf("")), `"cniVersion": "1.0.0", "name": "cnitest", `, "", 1)
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion": "1.1.0", "name": "cnitest", "plugins": [` + plugin + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cni.GetStatusNetworkList(ctx, list); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	pods := map[string]string{"ctr-a": a, "ctr-b": b}
	var ipB net.IP
	for id, ns := range pods {
		res, err := cni.AddNetworkList(ctx, list, rt(id, ns))
		if err != nil {
			t.Fatalf("ADD %s (configuration 1.1.0, host-local speaks 1.0.0): %v", id, err)
		}
		if id == "ctr-b" {
			r100, err := types100.NewResultFromResult(res)
			if err != nil {
				t.Fatal(err)
			}
			ipB = r100.IPs[0].Address.IP
		}
	}
	if err := ping(a, ipB); err != nil {
		t.Errorf("pod a -> pod b %s: %v", ipB, err)
	}
	planeLeft := func() bool { _, err := os.Stat(tcbpf.PinDir(r.plane)); return err == nil }
	if !planeLeft() {
		t.Fatalf("no eBPF plane %s after ADD in veth-ebpf mode", tcbpf.PinDir(r.plane))
	}
	gc := func(valid ...string) {
		t.Helper()
		args := &libcni.GCArgs{}
		for _, id := range valid {
			args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: id, IfName: "eth0"})
		}
		if err := cni.GCNetworkList(ctx, list, args); err != nil {
			t.Fatalf("GC keeping %v: %v\nplugin log:\n%s", valid, err, log.String())
		}
	}
	gc("ctr-a", "ctr-b")
	if !planeLeft() || len(r.ourLinks()) != 2 {
		t.Fatalf("GC with both attachments valid: plane there %v, links %v", planeLeft(), r.ourLinks())
	}
	if err := cni.DelNetworkList(ctx, list, rt("ctr-a", a)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "last attachment") {
		t.Errorf("DEL of the first of two pods says it was the last:\n%s", log.String())
	}
	if err := cni.DelNetworkList(ctx, list, rt("ctr-b", b)); err != nil {
		t.Fatal(err)
	}
	if want := "leaves its eBPF plane " + tcbpf.PinDir(r.plane); !strings.Contains(log.String(), want) {
		t.Errorf("the last DEL's log does not say %q:\n%s", want, log.String())
	}
	r.assertClean("after DEL")
	if !planeLeft() {
		t.Fatal("DEL removed the plane: it is GC's to remove")
	}
	// Another process holding the plane's maps (a Service proxy sharing
	// the node's plane) keeps it: this test process, here.
	dp, err := tcbpf.Open(r.plane)
	if err != nil {
		t.Fatal(err)
	}
	gc()
	dp.Close()
	if !planeLeft() {
		t.Fatal("GC removed a plane another process holds")
	}
	if want := fmt.Sprintf("process %d holds its maps", os.Getpid()); !strings.Contains(log.String(), want) {
		t.Errorf("GC's log does not say %q:\n%s", want, log.String())
	}
	gc()
	if planeLeft() {
		t.Errorf("GC with no attachment left kept %s:\n%s", tcbpf.PinDir(r.plane), log.String())
	}
	if ents, err := os.ReadDir(tcbpf.Root); err == nil {
		for _, e := range ents {
			if e.Name() == r.plane {
				t.Errorf("%s still holds plane %s", tcbpf.Root, e.Name())
			}
		}
	}
	if !strings.Contains(log.String(), "removed its eBPF plane") {
		t.Errorf("GC's log does not say it removed the plane:\n%s", log.String())
	}
	t.Logf("plugin log:\n%s", log.String())
}
