package cluster

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

func TestSpecValidateFlannel(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{CNI: clusternet.CNIFlannel, FlannelBackend: "udp"}, `--flannel-backend "udp": flannel's backends here are vxlan, host-gw`},
		{Spec{CNI: clusternet.CNIFlannel, CNIMode: modes.VethRouted}, "--cni-mode veth-routed: modes are vnetlab's plugin's"},
		{Spec{FlannelBackend: clusternet.FlannelHostGW}, "--flannel-backend host-gw: backends are flannel's: add --cni flannel"},
		{Spec{CNI: clusternet.CNIVnetlab, FlannelBackend: clusternet.FlannelVXLAN}, "add --cni flannel"},
	} {
		c.spec.Name, c.spec.Nodes, c.spec.Proxy = "k", 2, "iptables"
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.spec, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %q is more than one line", c.spec, err)
		}
	}
	for _, b := range append([]string{""}, clusternet.FlannelBackends...) {
		s := Spec{Name: "k", Nodes: 2, Proxy: "iptables", CNI: clusternet.CNIFlannel, FlannelBackend: b}
		if err := s.Validate(); err != nil {
			t.Errorf("backend %q: %v", b, err)
		}
		want := b
		if b == "" {
			want = clusternet.FlannelVXLAN
		}
		if n := s.Network(); n.CNI != clusternet.CNIFlannel || n.CNIMode != want || s.networkFacts()[FactCNIMode] != want {
			t.Errorf("backend %q: network %+v, facts %v", b, n, s.networkFacts())
		}
	}
}

func TestParseSubnetEnv(t *testing.T) {
	s, err := parseSubnetEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.2.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Network.String() != "10.244.0.0/16" || s.Subnet.String() != "10.244.2.0/24" || s.MTU != 1450 || !s.IPMasq {
		t.Errorf("parsed %+v", s)
	}
	for text, want := range map[string]string{
		"FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.2.1/24\nFLANNEL_MTU=1450\n":                     "no FLANNEL_IPMASQ",
		"FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.2.1/24\nFLANNEL_MTU=big\nFLANNEL_IPMASQ=true\n": "FLANNEL_MTU=big",
		"FLANNEL_NETWORK=10.244.0.0\nFLANNEL_SUBNET=10.244.2.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n":   "FLANNEL_NETWORK=10.244.0.0",
	} {
		if _, err := parseSubnetEnv(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// The configuration is what flannel's plugin hands the bridge plugin: the
// MTU from subnet.env, no masquerade of its own when flanneld masquerades,
// the node's subnet and a route to the whole network.
func TestFlannelConflist(t *testing.T) {
	s, err := parseSubnetEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n")
	if err != nil {
		t.Fatal(err)
	}
	data, err := flannelConflist(s, "/x/cni-ipam")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type                                      string
			MTU                                       int
			IPMasq, IsGateway, IsDefaultGateway, Hair bool `json:"-"`
			IPAM                                      struct {
				Type, Subnet, DataDir string
				Routes                []struct{ Dst string }
			}
		}
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
		t.Fatalf("plugins %+v", conf.Plugins)
	}
	br := conf.Plugins[0]
	if br.MTU != 1450 || br.IPAM.Type != "host-local" || br.IPAM.Subnet != "10.244.1.0/24" || br.IPAM.DataDir != "/x/cni-ipam" ||
		len(br.IPAM.Routes) != 1 || br.IPAM.Routes[0].Dst != "10.244.0.0/16" {
		t.Errorf("bridge %+v", br)
	}
	for _, want := range []string{`"ipMasq": false`, `"isGateway": true`, `"isDefaultGateway": true`, `"hairpinMode": true`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %s", data, want)
		}
	}
}

// Each node's flanneld writes its own /run/flannel (the hostPath's
// subdirectory named after the node), reaches the API server directly, and
// is not privileged.
func TestFlannelPod(t *testing.T) {
	p := flannelPod("vnetlab.local/flannel:x", "/c/flannel-run")
	c := p.Containers[0]
	if !p.HostNetwork || c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged {
		t.Errorf("hostNetwork %v, privileged %v", p.HostNetwork, c.SecurityContext.Privileged)
	}
	var run bool
	for _, m := range c.VolumeMounts {
		run = run || m.MountPath == "/run/flannel" && m.SubPathExpr == "$(NODE_NAME)"
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	if !run || !env["NODE_NAME"] || !env["POD_NAME"] || !env["KUBERNETES_SERVICE_HOST"] {
		t.Errorf("mounts %+v, env %v", c.VolumeMounts, env)
	}
	if !strings.Contains(netConf(clusternet.FlannelHostGW), `"Type":"host-gw"`) || !strings.Contains(netConf("vxlan"), clusterCIDR.String()) {
		t.Errorf("net-conf.json %s", netConf(clusternet.FlannelHostGW))
	}
}

// A second cluster with flannel in each backend: flanneld's pods run on
// both nodes and the nodes get Ready from the configuration written from
// their subnet.env; pods reach each other on the same node and across nodes
// and a ClusterIP through kube-proxy (podPaths); the cross-node packets take
// flannel's path: in vxlan they leave node 1 through flannel.1 (its TX
// counter rises by the clients' packets), in host-gw node 1's route to node
// 2's pods is flannel's direct one via node 2's address on eth0 and there is
// no flannel.1; `kube down` leaves nothing, nor a machine-wide /run/flannel.
func TestFlannelCluster(t *testing.T) {
	needCluster(t)
	for i, backend := range clusternet.FlannelBackends {
		t.Run(backend, func(t *testing.T) { flannelCluster(t, "fl"+string(rune('a'+i)), backend) })
	}
}

// flannelDevice is the vxlan backend's device (VNI 1).
const flannelDevice = "flannel.1"

func flannelCluster(t *testing.T, name, backend string) {
	_, runFlannelBefore := os.Stat("/run/flannel")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: "iptables", CNI: clusternet.CNIFlannel, FlannelBackend: backend}, func(*lab.State) {
		if _, err := os.Stat("/run/flannel"); err == nil && runFlannelBefore != nil {
			t.Error("the cluster made the machine's /run/flannel")
		}
	})
	if want := "flannel " + backend + " + bridge+host-local"; st.Facts[FactCNI] != want {
		t.Errorf("fact cni = %q, want %q", st.Facts[FactCNI], want)
	}
	n1 := st.Nodes[0]
	before := flannelTX(t, n1)
	_, _, done := podPaths(ctx, t, st)
	after := flannelTX(t, n1)
	switch backend {
	case clusternet.FlannelVXLAN:
		// Each transaction of node 1's cross-node clients sends its request
		// from node 1 to node 2's pod: one packet or more through flannel.1.
		// (Their count, not a fixed floor: a loaded machine completes fewer.)
		want := int64(done["cross-node-podip"] + done["cross-clusterip"])
		t.Logf("%s on %s: %d packets sent, %d cross-node transactions", flannelDevice, n1.Name, after-before, want)
		if before < 0 || want == 0 || after-before < want {
			t.Errorf("%s on %s sent %d packets during the cross-node clients (before %d), want at least their %d transactions", flannelDevice, n1.Name, after-before, before, want)
		}
	case clusternet.FlannelHostGW:
		if before >= 0 {
			t.Errorf("%s exists on %s with host-gw", flannelDevice, n1.Name)
		}
		directRoute(t, n1, st.Nodes[1])
	}
}

// flannelTX is flannel.1's TX packet counter on node n, -1 without it.
func flannelTX(t *testing.T, n lab.NodeState) int64 {
	t.Helper()
	h, err := nsutil.Handle(n.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(flannelDevice)
	if err != nil {
		return -1
	}
	return int64(l.Attrs().Statistics.TxPackets)
}

// directRoute checks that node from routes to node to's pods via to's
// address on its uplink (flannel host-gw's route, not vnetlab's: the
// cluster's wiring adds none with flannel).
func directRoute(t *testing.T, from, to lab.NodeState) {
	t.Helper()
	h, err := nsutil.Handle(from.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	i := 2 // to is node 2
	routes, err := h.RouteGet(modes.NthIP(podCIDR(i), 5))
	if err != nil || len(routes) == 0 {
		t.Fatalf("route from %s to %s's pods: %v", from.Name, to.Name, err)
	}
	l, err := h.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		t.Fatal(err)
	}
	if !routes[0].Gw.Equal(net.ParseIP(to.IP)) || l.Attrs().Name != uplink {
		t.Errorf("%s routes %s's pods via %s dev %s, want via %s dev %s", from.Name, to.Name, routes[0].Gw, l.Attrs().Name, to.IP, uplink)
	}
	var fl []netlink.Route
	if fl, err = h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: podCIDR(i)}, netlink.RT_FILTER_DST); err != nil || len(fl) != 1 {
		t.Errorf("routes to %s in %s: %v, %v; want flannel's one", podCIDR(i), from.Name, fl, err)
	}
}
