package cluster

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/cni"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// DefaultCNIMode is --cni-mode's default with --cni vnetlab.
const DefaultCNIMode = modes.VethRouted

// systemCNIDir holds Debian's plugins; never written to.
const systemCNIDir = "/usr/lib/cni"

// validateCNI checks --cni, --cni-mode and --flannel-backend.
func (s Spec) validateCNI() error {
	if s.FlannelBackend != "" && s.CNI != clusternet.CNIFlannel {
		return field.Errorf("flannel_backend", "{flannel_backend} %s: backends are flannel's: add {cni} %s", s.FlannelBackend, clusternet.CNIFlannel)
	}
	switch s.CNI {
	case "", clusternet.CNIBridge:
		if s.CNIMode != "" {
			return field.Errorf("cni_mode", "{cni_mode} %s: modes are vnetlab's plugin's: add {cni} vnetlab", s.CNIMode)
		}
		return nil
	case clusternet.CNIVnetlab:
		m, err := modes.Get(s.cniMode())
		if err != nil || m.Attach == nil {
			return field.Errorf("cni_mode", "{cni_mode} %q: vnetlab's CNI plugin wires pods with %s", s.CNIMode, strings.Join(modes.AttachModes(), ", "))
		}
		if err := modes.Available(m); err != nil {
			return field.Errorf("cni_mode", "{cni_mode} %s: %v (vnetlab doctor says more)", m.Name, err)
		}
		return nil
	case clusternet.CNIFlannel:
		return s.validateFlannel()
	case clusternet.CNICilium:
		return s.validateCilium()
	}
	return field.Errorf("cni", "{cni} %q: choose %s", s.CNI, strings.Join(clusternet.CNIs, ", "))
}

func (s Spec) cniMode() string {
	if s.CNIMode == "" {
		return DefaultCNIMode
	}
	return s.CNIMode
}

// NodePlane is the eBPF data plane (bpffs directory under
// /sys/fs/bpf/vnetlab) of node i of cluster k: veth-ebpf's host routing
// attaches there, and vnetlab's Service proxy fills the Service maps of the
// same one (ProxyPlane), so that a node has one plane: with veth-ebpf the
// programs the CNI put on the pods translate the proxy's Services.
func NodePlane(k string, i int) string { return ProxyPlane(k, NodeName(k, i)) }

// cniBinDir prepares the directory node n's containerd runs CNI plugins
// from: with vnetlab's plugin, the cluster's own directory of links
// (vnetlab-cni to this vnetlab binary; loopback, host-local, portmap to
// Debian's); with Cilium, the node's own (ciliumCNIBinDir); so that nothing
// is installed into the system's plugin directory.
func (b *builder) cniBinDir(n node) (string, error) {
	if b.spec.CNI == clusternet.CNICilium {
		return b.ciliumCNIBinDir(n)
	}
	if b.spec.CNI != clusternet.CNIVnetlab {
		return systemCNIDir, nil
	}
	dir := filepath.Join(b.dir, "cni-bin")
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	links := map[string]string{cni.BinaryName: b.self}
	for _, p := range []string{"loopback", "host-local", "portmap"} {
		links[p] = filepath.Join(systemCNIDir, p)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// writeVnetlabCNI writes node n's conflist for vnetlab's plugin, and
// journals its eBPF plane (NodePlane) for teardown.
func (b *builder) writeVnetlabCNI(n node) error {
	plane := ProxyPlane(b.spec.Name, n.name)
	if err := b.l.Journal().Record(lab.KindPin, tcbpf.PinDir(plane)); err != nil {
		return err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "vnetlab",
		"plugins": []any{
			map[string]any{"type": cni.BinaryName, "mode": b.spec.cniMode(), "nodeNetns": n.ns, "plane": plane,
				"stateDir": filepath.Join(n.dir, "cni-state"),
				"ipam": map[string]any{"type": "host-local", "dataDir": filepath.Join(n.dir, "cni-ipam"),
					"ranges": ipamRanges(n.podRanges)}},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.dir, "cni", "10-vnetlab.conflist"), data, 0o644)
}

// ipamRanges is host-local's "ranges" for a node's pod ranges: one range
// set per family, so that each pod gets an address of each.
func ipamRanges(nets []*net.IPNet) [][]map[string]string {
	var r [][]map[string]string
	for _, n := range nets {
		r = append(r, []map[string]string{{"subnet": n.String()}})
	}
	return r
}

// ipamDefaultRoutes is a default route of each family of nets.
func ipamDefaultRoutes(nets []*net.IPNet) []map[string]string {
	var r []map[string]string
	for _, n := range nets {
		dst := "0.0.0.0/0"
		if n.IP.To4() == nil {
			dst = "::/0"
		}
		r = append(r, map[string]string{"dst": dst})
	}
	return r
}

// cniRanges and cniDefaultRoutes are ipamRanges and ipamDefaultRoutes as
// JSON for the bridge plugin's template.
func cniRanges(nets []*net.IPNet) string        { return jsonText(ipamRanges(nets)) }
func cniDefaultRoutes(nets []*net.IPNet) string { return jsonText(ipamDefaultRoutes(nets)) }

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
