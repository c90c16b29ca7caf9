package cluster

import (
	"archive/tar"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// kube-router's pod runs its firewall alone in the node's network, not
// privileged, with its node's name and the API server's address; its flags
// carry the cluster's Service ranges and families; its image holds
// kube-router, iptables under every name it runs and ipset, with their
// libraries.
func TestKubeRouterPodAndImage(t *testing.T) {
	b := &builder{addrs: addrPlan{fam: family.Dual}}
	args := b.kubeRouterArgs()
	for _, want := range []string{"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-ipv4=true", "--enable-ipv6=true",
		"--service-cluster-ip-range=" + serviceCIDR + "," + serviceCIDR6} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	p := kubeRouterPod("vnetlab.local/kube-router:x", args)
	c := p.Containers[0]
	if !p.HostNetwork || c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged || len(c.SecurityContext.Capabilities.Add) != 2 {
		t.Errorf("hostNetwork %v, security %+v", p.HostNetwork, c.SecurityContext)
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
	}
	if !env["NODE_NAME"] || !env["KUBERNETES_SERVICE_HOST"] {
		t.Errorf("env %v", env)
	}
	img, err := kubeRouterContent("vnetlab.local/kube-router:x", "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Image.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v (%v)", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var files []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, "/"+strings.TrimPrefix(h.Name, "/"))
	}
	for _, want := range []string{kubeRouterPath, "/usr/bin/ipset", "/usr/bin/iptables", "/usr/bin/iptables-restore", "/usr/bin/ip6tables-save"} {
		if !slices.Contains(files, want) {
			t.Errorf("the image lacks %s", want)
		}
	}
	if !slices.ContainsFunc(files, func(f string) bool { return strings.Contains(f, "libipset") }) {
		t.Errorf("the image lacks ipset's library: %v", files)
	}
}
