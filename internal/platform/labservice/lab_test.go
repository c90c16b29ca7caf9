package labservice

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Integration tests: real labs (names start with "sv"), real kernel NAT,
// real sockets. A socket belongs to the namespace it was created in, so the
// servers and clients are goroutines of this test whose sockets are made
// inside the pods' namespaces.

const vip = DefaultVIP

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	for _, p := range []string{"iptables-restore", "nft"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not installed", p)
		}
	}
}

// skipSocketLevel: these tests' clients are goroutines of the test, and a
// socket-level provider (ebpf-sock) acts only for processes started in the
// lab's cgroup; internal/runner's TestRunEBPFFastPaths runs it for real.
func skipSocketLevel(t *testing.T, p string) {
	t.Helper()
	if _, ok := registry[p].(ClientPlacer); ok {
		t.Skipf("%s translates only for processes in the lab's cgroup (tested in internal/runner)", p)
	}
}

// newLab brings a lab up and removes it when the test ends, also on
// failure. Its lock is released at once: Apply takes it, as the CLI does.
func newLab(t *testing.T, name, mode string, pods int, opts map[string]string) *lab.State {
	t.Helper()
	return newSpecLab(t, lab.Spec{Name: name, Mode: mode, PodCIDR: lab.DefaultPodCIDR, Options: opts}, pods)
}

// newSpecLab is newLab for any spec (an IP family, ...).
func newSpecLab(t *testing.T, spec lab.Spec, pods int) *lab.State {
	t.Helper()
	l, _ := testnet.UpLab(t, spec, pods)
	l.Release()
	return l.State
}

// load applies c to the lab and saves it, as the CLI does.
func load(t *testing.T, st *lab.State, old, c *Config) {
	t.Helper()
	if err := Commit(st, old, c); err != nil {
		t.Fatal(err)
	}
}

// servedLab is the setup most tests here share: a two-pod lab of mode with
// provider p loaded (the engine-port services plus extra generated ones)
// and pod-a serving TCP/UDP on 5201. It returns the lab, its config and the
// server and client pods.
func servedLab(t *testing.T, name, mode, p string, extra int, opts map[string]string) (*lab.State, *Config, lab.PodState, lab.PodState) {
	t.Helper()
	st := newLab(t, name, mode, 2, opts)
	c, err := Setup(st, p, extra, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := pod(st, "pod-a"), pod(st, "pod-b")
	serve(t, a.NS, 5201)
	return st, c, a, b
}

func pod(st *lab.State, name string) lab.PodState {
	for _, p := range st.Pods {
		if p.Name == name {
			return p
		}
	}
	panic("no pod " + name)
}

// serve runs the shared TCP/UDP echo servers (counting accepts) in namespace ns.
func serve(t *testing.T, ns string, port int) *testnet.Server { return testnet.Serve(t, ns, port, "") }

func dial(ns, network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := nsutil.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// echo sends a line on c and expects it back.
func echo(c net.Conn, msg string) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echo: sent %q, got %q", msg, buf)
	}
	return nil
}

// roundTrip dials addr from ns and echoes once. For UDP the socket is
// connected, so the reply only arrives if its source is the address dialed:
// replies must be reverse-NATed to the clusterIP.
func roundTrip(ns, network, addr string) error {
	c, err := dial(ns, network, addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return echo(c, "vnetlab "+network)
}

// TCP and UDP through the clusterIP, and hairpin (a pod reaching itself
// through its service), for every provider and mode that serves Services.
func TestClusterIPProvidersModes(t *testing.T) {
	requireRoot(t)
	modes := map[string]string{"veth-routed": "vr", "bridge": "br", "docker-nat": "dn", "macvlan": "mv"}
	for _, p := range Names() {
		for mode, short := range modes {
			t.Run(p+"/"+mode, func(t *testing.T) {
				skipSocketLevel(t, p)
				st, _, a, b := servedLab(t, "sv-"+p[:3]+"-"+short, mode, p, 0, nil)
				if err := roundTrip(b.NS, "tcp4", a.IP+":5201"); err != nil {
					t.Fatalf("pod IP (control): %v", err)
				}
				for _, network := range []string{"tcp4", "udp4"} {
					if err := roundTrip(b.NS, network, vip+":5201"); err != nil {
						t.Errorf("%s pod-b -> %s:5201 -> pod-a: %v", network, vip, err)
					}
				}
				if p == EBPF && (mode == "bridge" || mode == "docker-nat") {
					checkSwitchedToBackend(t, st)
				}
				err := roundTrip(a.NS, "tcp4", vip+":5201")
				if mode != "bridge" || p == EBPF {
					if err != nil {
						t.Errorf("hairpin pod-a -> %s:5201 -> pod-a: %v", vip, err)
					}
					return
				}
				// A Linux bridge never sends a frame back out of the port it came
				// in on, and br_netfilter hands the DNATed packet back to the
				// bridge: hairpin needs the port in hairpin mode (kubelet's
				// --hairpin-mode=hairpin-veth; docker-nat sets it, bridge does not).
				if err == nil {
					t.Errorf("hairpin on a bridge without hairpin ports worked: the kernel behaviour this test documents changed")
				}
				setHairpin(t, st, "pod-a")
				if err := roundTrip(a.NS, "tcp4", vip+":5201"); err != nil {
					t.Errorf("hairpin with pod-a's port in hairpin mode: %v", err)
				}
			})
		}
	}
}

// checkSwitchedToBackend: on a bridge, the ebpf provider addresses a
// translated packet to its backend's MAC, so the bridge switches it as it
// does a packet sent to the pod IP (bpf/host.h pod_set_dmac): its counter
// moved, and the node routed none of it.
func checkSwitchedToBackend(t *testing.T, st *lab.State) {
	t.Helper()
	pl, err := tcbpf.Open(st.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	hs, err := pl.HostStats()
	if err != nil || hs.L2 == 0 {
		t.Errorf("bridge: no translated packet was switched to its backend's MAC: %+v, %v", hs, err)
	}
}

// setHairpin puts a pod's bridge port in hairpin mode.
func setHairpin(t *testing.T, st *lab.State, podName string) {
	t.Helper()
	h, err := nsutil.Handle(st.Nodes[0].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i, p := range st.Pods {
		if p.Name == podName {
			l, err := h.LinkByName(modes.HostIfname("veth-", p.Name, i))
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetHairpin(l, true); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With bridge-nf-call-iptables=0 the kernel bridges the backend's replies
// past netfilter: iptables and nftables clusterIPs must fail (and say why
// in their caveat), while the pod IP and the ebpf provider keep working.
func TestBridgeNfCallOffBreaksNetfilterProviders(t *testing.T) {
	requireRoot(t)
	opts := map[string]string{"bridge_nf_call_iptables": "off"}
	for _, p := range Names() {
		t.Run(p, func(t *testing.T) {
			skipSocketLevel(t, p)
			_, _, a, b := servedLab(t, "sv-nfoff-"+p[:3], "bridge", p, 0, opts)
			if err := roundTrip(b.NS, "tcp4", a.IP+":5201"); err != nil {
				t.Fatalf("pod IP (control): %v", err)
			}
			err := roundTrip(b.NS, "tcp4", vip+":5201")
			caveat := Caveat(p, mode(t, "bridge"), opts)
			t.Logf("%s clusterIP with nf-call off: %v", p, err)
			switch p {
			case "iptables", "nftables":
				if err == nil {
					t.Errorf("%s clusterIP worked with bridge_nf_call_iptables=off: replies cannot be reverse-NATed, so something is wrong with the test", p)
				}
				if caveat == "" {
					t.Errorf("%s: no caveat explains the failure", p)
				}
			default:
				if err != nil || caveat != "" {
					t.Errorf("%s does not need netfilter: err %v, caveat %q", p, err, caveat)
				}
			}
		})
	}
}

// Three backends all receive connections; the distribution is logged.
func TestThreeBackendsShareConnections(t *testing.T) {
	requireRoot(t)
	const conns = 60
	for _, p := range Names() {
		t.Run(p, func(t *testing.T) {
			skipSocketLevel(t, p)
			st := newLab(t, "sv-3be-"+p[:3], "veth-routed", 4, nil)
			c := &Config{Provider: p}
			spec := Spec{Service: vip + ":80/tcp", Backends: []string{"pod-a:5201", "pod-b:5201", "pod-c:5201"}}
			s, err := spec.Build(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Add(s); err != nil {
				t.Fatal(err)
			}
			if i, _ := Describe(p); i.Endpoints {
				c.Endpoints = DefaultEndpoints(st)
			}
			load(t, st, nil, c)
			var servers []*testnet.Server
			for _, name := range []string{"pod-a", "pod-b", "pod-c"} {
				servers = append(servers, serve(t, pod(st, name).NS, 5201))
			}
			client := pod(st, "pod-d")
			for i := 0; i < conns; i++ {
				if err := roundTrip(client.NS, "tcp4", vip+":80"); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			var dist []string
			total := int64(0)
			for i, s := range servers {
				n := s.Accepts.Load()
				total += n
				dist = append(dist, fmt.Sprintf("%s=%d", []string{"pod-a", "pod-b", "pod-c"}[i], n))
				// P(a backend gets none of 60 at 1/3 each) = 3 * (2/3)^60, about 1e-10.
				if n == 0 {
					t.Errorf("%s got no connection", []string{"pod-a", "pod-b", "pod-c"}[i])
				}
			}
			t.Logf("%s: %d connections to %s:80 -> %s", p, conns, vip, strings.Join(dist, " "))
			if total != conns {
				t.Errorf("backends accepted %d connections, the client made %d", total, conns)
			}
		})
	}
}

// Deleting a service while a connection through it is open crashes
// nothing: the update succeeds, new connections fail, the lab stays usable
// (the service comes back). Every provider keeps the open connection to
// its backend: iptables and nftables because its conntrack entry holds the
// NAT, ebpf because an established TCP flow follows its BPF conntrack entry
// whatever became of its Service (bpf/README.md).
func TestDeleteServiceDuringConnection(t *testing.T) {
	requireRoot(t)
	for _, p := range Names() {
		t.Run(p, func(t *testing.T) {
			skipSocketLevel(t, p)
			st, c, _, b := servedLab(t, "sv-del-"+p[:3], "veth-routed", p, 0, nil)
			conn, err := dial(b.NS, "tcp4", vip+":5201", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := echo(conn, "before"); err != nil {
				t.Fatal(err)
			}
			key := Key{netip.MustParseAddr(vip), 5201, TCP}
			old := c.Clone()
			if err := c.Del(key); err != nil {
				t.Fatal(err)
			}
			load(t, st, old, c)
			err = echo(conn, "after")
			t.Logf("%s: open connection after its service was deleted: %v", p, err)
			if err != nil {
				t.Errorf("%s: the open connection broke: %v (its conntrack entry should keep its backend)", p, err)
			}
			if err := roundTrip(b.NS, "tcp4", vip+":5201"); err == nil {
				t.Errorf("%s: a new connection to a deleted service succeeded", p)
			}
			old = c.Clone()
			s, err := Spec{Service: key.String(), Backends: []string{"pod-a"}}.Build(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Add(s); err != nil {
				t.Fatal(err)
			}
			load(t, st, old, c)
			if err := roundTrip(b.NS, "tcp4", vip+":5201"); err != nil {
				t.Errorf("%s: service added back, but: %v", p, err)
			}
		})
	}
}

// 10k generated services load (times logged), the tested service still
// answers behind them, and adding one more is a small update.
func TestTenThousandServicesLoad(t *testing.T) {
	requireRoot(t)
	for _, p := range Names() {
		t.Run(p, func(t *testing.T) {
			skipSocketLevel(t, p)
			st, c, _, b := servedLab(t, "sv-10k-"+p[:3], "veth-routed", p, 10000, nil)
			install := c.LoadSeconds
			if err := roundTrip(b.NS, "tcp4", vip+":5201"); err != nil {
				t.Fatalf("behind 10k services: %v", err)
			}
			old := c.Clone()
			s, err := Spec{Service: "10.96.0.200:80", Backends: []string{"pod-a:5201"}}.Build(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Add(s); err != nil {
				t.Fatal(err)
			}
			load(t, st, old, c)
			if err := roundTrip(b.NS, "tcp4", "10.96.0.200:80"); err != nil {
				t.Errorf("service added to 10k: %v", err)
			}
			t.Logf("%s: %d services loaded in %.2fs; one more added in %.2fs", p, old.Count(), install, c.LoadSeconds)
		})
	}
}

// A failed install leaves nothing behind and says what failed.
func TestInstallFailureLeavesNothing(t *testing.T) {
	requireRoot(t)
	st := newLab(t, "sv-fail", "veth-routed", 2, nil)
	c, err := NewConfig(st, "iptables", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := *st
	bad.Spec.PodCIDR = "192.168.10.0/99" // makes iptables-restore reject the service chains
	if err := Apply(&bad, nil, c); err == nil || !strings.Contains(err.Error(), "iptables-restore") {
		t.Fatalf("install with a broken rule: %v", err)
	}
	if c.Installed {
		t.Error("config marked installed after a failed install")
	}
	chains, jumps, err := kubeChains(st.Nodes[0].NS, nfIPv4)
	if err != nil {
		t.Fatal(err)
	}
	if len(chains)+len(jumps) != 0 {
		t.Errorf("left behind: chains %v, jumps %v", chains, jumps)
	}
}

// svc add on a live Service adds backends in place: every
// connection open through it keeps its backend, and new connections use
// the new ones too. (A delete and add, as the lab's ebpf provider once did,
// gives the Service a new id: its flows are placed again by hash, most of
// them on a new backend, where they break.)
func TestAddBackendKeepsLiveFlows(t *testing.T) {
	requireRoot(t)
	const live, fresh = 8, 30
	for _, p := range Names() {
		t.Run(p, func(t *testing.T) {
			skipSocketLevel(t, p)
			st := newLab(t, "sv-live-"+p[:3], "veth-routed", 5, nil)
			key, err := ParseKey(vip + ":80/tcp")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Add(st.Name, AddRequest{Key: key, Backends: []BackendSpec{{Host: "pod-a", Port: 5201}}, Provider: p}); err != nil {
				t.Fatal(err)
			}
			client := pod(st, "pod-e")
			if i, _ := Describe(p); i.Endpoints {
				if _, err := Attach(st.Name, PodRef{Pod: client.Name}); err != nil {
					t.Fatal(err)
				}
			}
			var servers []*testnet.Server
			for _, name := range []string{"pod-a", "pod-b", "pod-c", "pod-d"} {
				servers = append(servers, serve(t, pod(st, name).NS, 5201))
			}
			var conns []net.Conn
			for i := 0; i < live; i++ {
				c, err := dial(client.NS, "tcp4", vip+":80", 2*time.Second)
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				defer c.Close()
				if err := echo(c, "before"); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				conns = append(conns, c)
			}
			more := []BackendSpec{{Host: "pod-b", Port: 5201}, {Host: "pod-c", Port: 5201}, {Host: "pod-d", Port: 5201}}
			res, err := Add(st.Name, AddRequest{Key: key, Backends: more})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			for i, c := range conns {
				if err := echo(c, "after"); err != nil {
					t.Errorf("open connection %d broke when backends were added: %v", i, err)
				}
			}
			for i := 0; i < fresh; i++ {
				if err := roundTrip(client.NS, "tcp4", vip+":80"); err != nil {
					t.Fatalf("new connection %d: %v", i, err)
				}
			}
			// P(all 30 on pod-a with 4 backends) = 4^-30.
			var others int64
			for _, s := range servers[1:] {
				others += s.Accepts.Load()
			}
			if others == 0 {
				t.Errorf("%d new connections all went to pod-a: the added backends serve nothing", fresh)
			}
			t.Logf("%s: %d connections kept pod-a; %d of %d new ones went to the added backends", p, live, others, fresh)
		})
	}
}

// TestClusterIPv6ThroughProvider: a dual-stack veth-routed lab with the
// ebpf provider (`up --ip-family dual --provider ebpf --extra-services 300`)
// gets the service path's Services and 300 generated ones in both
// families, and TCP and UDP through the IPv6 clusterIP reach the backend's
// IPv6 socket (and the IPv4 clusterIP its IPv4 one), hairpin included;
// `svc add` of an IPv6 clusterIP with a pod backend takes the pod's IPv6
// address, and its clients reach it; without backends its clients are
// refused.
// (Every provider serves IPv6 now; TestCheckFamilyByProvider keeps the
// refusal of one that would not.)
func TestClusterIPv6ThroughProvider(t *testing.T) {
	requireRoot(t)
	st := newSpecLab(t, lab.Spec{Name: "sv-v6", Mode: "veth-routed", PodCIDR: lab.DefaultPodCIDR, Family: family.Dual}, 2)
	const extra = 300 // generated Services of each family in front of the tested ones
	if _, err := Setup(st, EBPF, extra, nil); err != nil {
		t.Fatal(err)
	}
	pl, err := tcbpf.Open(st.Name)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := pl.ListServices()
	pl.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		last := Generated(f, extra-1).Key()
		if !slices.ContainsFunc(loaded, func(s tcbpf.Service) bool { return s.VIP == last.VIP && s.Port == last.Port }) {
			t.Errorf("the plane lacks the last generated %s Service %s", f, last)
		}
	}
	a, b := pod(st, "pod-a"), pod(st, "pod-b")
	serve(t, a.NS, 5201)
	testnet.Serve6(t, a.NS, 5201, "")
	vip6 := netip.AddrPortFrom(netip.MustParseAddr(DefaultVIP6), 5201).String()
	for _, c := range []struct{ network, addr string }{{"tcp6", vip6}, {"udp6", vip6}, {"tcp4", vip + ":5201"}, {"udp4", vip + ":5201"}} {
		if err := roundTrip(b.NS, c.network, c.addr); err != nil {
			t.Errorf("%s pod-b -> %s -> pod-a: %v", c.network, c.addr, err)
		}
	}
	// Hairpin: pod-a reaches itself through the IPv6 clusterIP (its
	// source becomes the plane's IPv6 hairpin address, tcbpf.HairpinIP6).
	for _, network := range []string{"tcp6", "udp6"} {
		if err := roundTrip(a.NS, network, vip6); err != nil {
			t.Errorf("%s hairpin pod-a -> %s -> pod-a: %v", network, vip6, err)
		}
	}
	key, err := ParseKey("[fd00:10:96::200]:80/tcp")
	if err != nil {
		t.Fatal(err)
	}
	// Without backends it refuses its clients at once (the programs'
	// ICMPv6 port unreachable, from a tail call whose program array stays
	// pinned after the provider closed the plane).
	if _, err := Add(st.Name, AddRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	// (tcp6 is refused by the SYN's first retransmission, at 1 s: the first
	// SYN's ICMPv6 error finds the socket locked by connect, as with
	// kube-proxy's REJECT; docs/services.md.)
	for _, network := range []string{"tcp6"} { // the Service is /tcp
		took, err := testnet.RefusedAfter(func(f func() error) error { return nsutil.Do(b.NS, f) }, network, "[fd00:10:96::200]:80")
		if err != nil || took > 2500*time.Millisecond {
			t.Fatalf("%s to an IPv6 Service without backends: %v after %s, want connection refused", network, err, took)
		}
		t.Logf("%s to an IPv6 Service without backends: refused after %s", network, took.Round(time.Microsecond))
	}
	if _, err := Add(st.Name, AddRequest{Key: key, Backends: []BackendSpec{{Host: "pod-a", Port: 5201}}}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(st.Name)
	if err != nil {
		t.Fatal(err)
	}
	if i := c.Find(key); i < 0 || c.Services[i].Backends[0].IP.String() != a.IP6 {
		t.Fatalf("svc add [fd00:10:96::200]:80 pod-a:5201: services %v, want pod-a's IPv6 address %s", c.Services, a.IP6)
	}
	if err := roundTrip(b.NS, "tcp6", "[fd00:10:96::200]:80"); err != nil {
		t.Errorf("tcp6 through the added IPv6 Service: %v", err)
	}
}
