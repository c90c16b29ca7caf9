package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/kube/network"
	"github.com/vnetlab/vnetlab/internal/modes"
)

func TestSpecValidateFlannel(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{CNI: network.CNIFlannel, FlannelBackend: "udp"}, `--flannel-backend "udp": flannel's backends here are vxlan, host-gw`},
		{Spec{CNI: network.CNIFlannel, CNIMode: modes.VethRouted}, "--cni-mode veth-routed: modes are vnetlab's plugin's"},
		{Spec{FlannelBackend: network.FlannelHostGW}, "--flannel-backend host-gw: backends are flannel's: add --cni flannel"},
		{Spec{CNI: network.CNIVnetlab, FlannelBackend: network.FlannelVXLAN}, "add --cni flannel"},
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
	for _, b := range append([]string{""}, network.FlannelBackends...) {
		s := Spec{Name: "k", Nodes: 2, Proxy: "iptables", CNI: network.CNIFlannel, FlannelBackend: b}
		if err := s.Validate(); err != nil {
			t.Errorf("backend %q: %v", b, err)
		}
		want := b
		if b == "" {
			want = network.FlannelVXLAN
		}
		if n := s.Network(); n.CNI != network.CNIFlannel || n.CNIMode != want || s.networkFacts()[FactCNIMode] != want {
			t.Errorf("backend %q: network %+v, facts %v", b, n, s.networkFacts())
		}
	}
}

func TestParseSubnetEnv(t *testing.T) {
	s, err := parseSubnetEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.2.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Network.String() != "10.244.0.0/16" || s.Subnet.String() != "10.244.2.1/24" || s.MTU != 1450 || !s.IPMasq {
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
	if br.MTU != 1450 || br.IPAM.Type != "host-local" || br.IPAM.Subnet != "10.244.1.1/24" || br.IPAM.DataDir != "/x/cni-ipam" ||
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
	if !strings.Contains(netConf(network.FlannelHostGW), `"Type":"host-gw"`) || !strings.Contains(netConf("vxlan"), clusterCIDR.String()) {
		t.Errorf("net-conf.json %s", netConf(network.FlannelHostGW))
	}
}
