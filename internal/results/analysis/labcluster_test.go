package analysis

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// A lab file against a `kube run` file: bridge's pod cell is the cluster's
// same-node pod path, a two-node host-gw lab its cross-node one, host is
// host (hostNetwork), service(iptables) the Service path of an iptables
// kube-proxy; everything else stays unmatched. Both directions.
func TestDiffLabAgainstCluster(t *testing.T) {
	at := func(c *results.Cell, path, provider, placement, test string, nodes int) *results.Cell {
		c.Path, c.Provider, c.Placement, c.Test, c.Nodes = path, provider, placement, test, nodes
		return c
	}
	lab := &results.File{Cells: []*results.Cell{
		at(cellOf("bridge", 10, 10, 10, 10), "pod", "", "", "tcp_rr", 0),
		at(cellOf("bridge", 10, 10, 10, 10), "service", "iptables", "", "tcp_rr", 0),
		at(cellOf("bridge", 10, 10, 10, 10), "service", "nftables", "", "tcp_rr", 0),
		at(cellOf("host", 10, 10, 10, 10), "pod", "", "", "tcp_rr", 0),
		at(cellOf("host-gw", 10, 10, 10, 10), "pod", "", "", "tcp_rr", 2),
		at(cellOf("veth-routed", 10, 10, 10, 10), "pod", "", "", "tcp_rr", 0),
		at(cellOf("bridge", 10, 10, 10, 10), "pod", "", "", "tcp_crr", 0),
	}}
	cluster := &results.File{Metadata: results.Metadata{Cluster: &results.Cluster{Name: "k", CNI: "bridge+host-local", KubeProxyMode: "iptables"}},
		Cells: []*results.Cell{
			at(cellOf("k", 8, 8, 8, 8), "pod", "", "same-node", "tcp_rr", 0),
			at(cellOf("k", 8, 8, 8, 8), "pod", "", "cross-node", "tcp_rr", 0),
			at(cellOf("k", 8, 8, 8, 8), "service", "", "same-node", "tcp_rr", 0),
			at(cellOf("k", 8, 8, 8, 8), "host", "", "same-node", "tcp_rr", 0),
			at(cellOf("k", 8, 8, 8, 8), "host", "", "cross-node", "tcp_rr", 0),
		}}
	want := []string{
		"bridge|pod||tcp_rr ~ k|pod||tcp_rr|@same-node",
		"bridge|service|iptables|tcp_rr ~ k|service||tcp_rr|@same-node",
		"host|pod||tcp_rr ~ k|host||tcp_rr|@same-node",
		"host-gw|pod||tcp_rr ~ k|pod||tcp_rr|@cross-node",
	}
	fd := Diff(lab, cluster)
	var got []string
	for _, d := range fd.Deltas {
		got = append(got, d.Name())
		if !within(d.Pct(), -20, 1e-9) {
			t.Errorf("%s: %g%%, want -20%%", d.Name(), d.Pct())
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("matched\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(fd.OnlyOld) != 3 || len(fd.OnlyNew) != 1 || fd.OnlyNew[0].Placement != "cross-node" || fd.OnlyNew[0].Path != "host" {
		t.Errorf("unmatched: %d lab cells, %d cluster cells", len(fd.OnlyOld), len(fd.OnlyNew))
	}
	if !strings.Contains(fd.Note, "lab bridge = pod@same-node") {
		t.Errorf("note: %q", fd.Note)
	}
	// cluster as old, lab as new: the same pairs, the other way round.
	back := Diff(cluster, lab)
	if len(back.Deltas) != 4 || !within(back.Deltas[0].Pct(), 25, 1e-9) || back.Deltas[0].Name() != "k|pod||tcp_rr|@same-node ~ bridge|pod||tcp_rr" {
		t.Errorf("cluster vs lab: %d deltas, first %s %g%%", len(back.Deltas), back.Deltas[0].Name(), back.Deltas[0].Pct())
	}
	// Two labs still match by their own IDs, with no note.
	if two := Diff(lab, lab); len(two.Deltas) != len(lab.Cells) || two.Note != "" {
		t.Errorf("lab vs lab: %d deltas, note %q", len(two.Deltas), two.Note)
	}
	// A CNI vnetlab has no lab shape for: only host matches.
	cluster.Metadata.Cluster.CNI = "weave"
	if fd := Diff(lab, cluster); len(fd.Deltas) != 1 || !strings.Contains(fd.Note, `no lab mode has the shape of CNI "weave"`) {
		t.Errorf("weave: %d deltas, note %q", len(fd.Deltas), fd.Note)
	}
}

// A dual-stack lab against a dual-stack cluster (kube run --ip-family
// dual): each family's lab cell is matched with the cluster's cell of the
// same family, never the other's.
func TestDiffLabAgainstClusterByFamily(t *testing.T) {
	cell := func(mode, path, placement, fam string, v float64) *results.Cell {
		c := cellOf(mode, v, v, v, v)
		c.Path, c.Placement, c.Family, c.Test = path, placement, fam, "tcp_rr"
		return c
	}
	lab := &results.File{Cells: []*results.Cell{cell("bridge", "pod", "", "", 10), cell("bridge", "pod", "", "ipv6", 20)}}
	cluster := &results.File{Metadata: results.Metadata{Cluster: &results.Cluster{Name: "k", CNI: "bridge+host-local", KubeProxyMode: "iptables"}},
		Cells: []*results.Cell{cell("k", "pod", "same-node", "ipv6", 16), cell("k", "pod", "same-node", "", 8)}}
	fd := Diff(lab, cluster)
	var got []string
	for _, d := range fd.Deltas {
		got = append(got, d.Name())
		if !within(d.Pct(), -20, 1e-9) {
			t.Errorf("%s: %g%%, want -20%% (each family against its own)", d.Name(), d.Pct())
		}
	}
	if len(got) != 2 || len(fd.OnlyOld)+len(fd.OnlyNew) != 0 {
		t.Errorf("matched %v, unmatched %d lab and %d cluster cells: want both families matched", got, len(fd.OnlyOld), len(fd.OnlyNew))
	}
}

// A bug fixed: a cluster built with `kube up --cni vnetlab` had its
// CNI written as text ("vnetlab veth-routed + host-local") and never matched
// a lab mode. Through real files: the structured network pairs the lab's
// veth-routed pod cell with the cluster's same-node pod path and the lab's
// ebpf service cell with vnetlab-ebpf's Service path; a file written before
// the structured fields (texts only, socket LB in the proxy's text) still
// loads and pairs its pod cell, and none of its service cells (socket LB
// has no lab provider).
func TestDiffLabAgainstVnetlabCNIClusterFiles(t *testing.T) {
	at := func(c *results.Cell, path, provider, placement string) *results.Cell {
		c.Path, c.Provider, c.Placement, c.Test = path, provider, placement, "tcp_crr"
		return c
	}
	dir := t.TempDir()
	write := func(name string, f *results.File) string {
		f.SchemaVersion = results.SchemaVersion
		p := filepath.Join(dir, name)
		if err := results.Write(p, f); err != nil {
			t.Fatal(err)
		}
		return p
	}
	labPath := write("lab.json", &results.File{Cells: []*results.Cell{
		at(cellOf("veth-routed", 10, 10, 10, 10), "pod", "", ""),
		at(cellOf("veth-routed", 10, 10, 10, 10), "service", "ebpf", ""),
		at(cellOf("veth-routed", 10, 10, 10, 10), "service", "iptables", ""),
		at(cellOf("bridge", 10, 10, 10, 10), "pod", "", ""),
	}})
	clusterCells := func() []*results.Cell {
		return []*results.Cell{
			at(cellOf("k", 8, 8, 8, 8), "pod", "", "same-node"),
			at(cellOf("k", 8, 8, 8, 8), "pod", "", "cross-node"),
			at(cellOf("k", 8, 8, 8, 8), "service", "", "same-node"),
		}
	}
	cl := &results.Cluster{Name: "k"}
	cl.SetNetwork(clusternet.Network{CNI: clusternet.CNIVnetlab, CNIMode: "veth-routed", Proxy: clusternet.VnetlabEBPF}, "")
	newPath := write("cluster.json", &results.File{Metadata: results.Metadata{Cluster: cl}, Cells: clusterCells()})
	oldPath := write("cluster-old.json", &results.File{Metadata: results.Metadata{Cluster: &results.Cluster{Name: "k",
		CNI: "vnetlab veth-routed + host-local", KubeProxyMode: "vnetlab-ebpf + socket LB"}}, Cells: clusterCells()})
	read := func(p string) *results.File {
		f, err := results.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	names := func(fd *FileDiff) []string {
		var got []string
		for _, d := range fd.Deltas {
			got = append(got, d.Name())
		}
		return got
	}
	fd := Diff(read(labPath), read(newPath))
	want := []string{"veth-routed|pod||tcp_crr ~ k|pod||tcp_crr|@same-node", "veth-routed|service|ebpf|tcp_crr ~ k|service||tcp_crr|@same-node"}
	if got := names(fd); !slices.Equal(got, want) {
		t.Errorf("--cni vnetlab cluster: matched\n%s\nwant\n%s\nnote: %s", strings.Join(got, "\n"), strings.Join(want, "\n"), fd.Note)
	}
	if !strings.Contains(fd.Note, "lab veth-routed = pod@same-node") || !strings.Contains(fd.Note, "service(ebpf) = service") {
		t.Errorf("note: %q", fd.Note)
	}
	old := read(oldPath)
	if n := old.Metadata.Cluster; n.CNIPlugin != clusternet.CNIVnetlab || n.CNIMode != "veth-routed" || n.KubeProxyMode != clusternet.VnetlabEBPF || !n.SocketLB {
		t.Errorf("old file's cluster read as %+v", n)
	}
	if got := names(Diff(read(labPath), old)); !slices.Equal(got, want[:1]) {
		t.Errorf("old file with socket LB: matched %q, want only %q", got, want[:1])
	}
}

// Cilium's same-node pod path is the lab's veth-ebpf, and it has no
// cross-node lab; its Services pair with the lab provider of their data
// path: the socket LB of its kube-proxy replacement (ebpf-sock), else its
// agent's balancing at the pods' veths, which kube-proxy beside it never
// sees (ebpf).
func TestLabClusterShapeCilium(t *testing.T) {
	for proxy, provider := range map[string]string{clusternet.CiliumKPR: "ebpf-sock", clusternet.IPTables: "ebpf", clusternet.NFTables: "ebpf"} {
		n := clusternet.Network{CNI: clusternet.CNICilium, CNIMode: clusternet.CiliumNative, Proxy: proxy}
		if s := LabClusterShape(n); s[sameNode] != "veth-ebpf" || s[crossNode] != "" {
			t.Errorf("cilium: %v, want veth-ebpf / none", s)
		}
		if got := labProvider(n); got != provider {
			t.Errorf("cilium with %s: lab provider %q, want %s", proxy, got, provider)
		}
	}
	if got := labProvider(clusternet.Network{CNI: clusternet.CNIBridge, Proxy: clusternet.IPTables}); got != "iptables" {
		t.Errorf("bridge with iptables: lab provider %q, want iptables", got)
	}
}

// flannel's backend chooses its cross-node lab: vxlan (also when the
// backend is not known: flannel's default) or host-gw; same-node is cni0, the
// lab's bridge, in both.
func TestLabClusterShapeFlannel(t *testing.T) {
	for backend, cross := range map[string]string{clusternet.FlannelVXLAN: "vxlan", clusternet.FlannelHostGW: "host-gw", "": "vxlan"} {
		s := LabClusterShape(clusternet.Network{CNI: clusternet.CNIFlannel, CNIMode: backend})
		if s[sameNode] != "bridge" || s[crossNode] != cross {
			t.Errorf("flannel %q: %v, want bridge / %s", backend, s, cross)
		}
	}
	// flannel's pods on one node are bridged on cni0 past kube-proxy's rules,
	// as the default CNI's are: compare says so.
	cl := &results.Cluster{Name: "fl"}
	cl.SetNetwork(clusternet.Network{CNI: clusternet.CNIFlannel, CNIMode: clusternet.FlannelVXLAN, Proxy: "iptables"}, "")
	lab := &results.File{Cells: []*results.Cell{cellOf("bridge", 10, 10, 10, 10)}}
	if fd := Diff(lab, &results.File{Metadata: results.Metadata{Cluster: cl}}); !strings.Contains(fd.Note, "kube-proxy's netfilter rules") || !strings.Contains(fd.Note, "lab vxlan with 2 nodes = pod@cross-node") {
		t.Errorf("flannel note: %q", fd.Note)
	}
}

// One file with a lab's cells beside a cluster's (kube run with kube.lab)
// splits into the two sides, which Diff pairs as two files; a file of one
// side does not split. The one-node lab of kube.lab_same_node labels its
// modes (host-1node: mode host) and pairs with the same-node cells; a
// labelled variant with options is another path and pairs with nothing.
func TestSplitLabCluster(t *testing.T) {
	cell := func(mode, path, placement string, nodes int) *results.Cell {
		c := cellOf(mode, 10, 10, 10, 10)
		c.Path, c.Placement, c.Test, c.Nodes = path, placement, "tcp_rr", nodes
		return c
	}
	labelled := func(label, mode string, options map[string]string) *results.Cell {
		c := cell(label, "pod", "", 0)
		c.LabMode, c.ModeOptions = mode, options
		return c
	}
	mixed := &results.File{Metadata: results.Metadata{Cluster: &results.Cluster{Name: "fl", CNI: "flannel", CNIPlugin: clusternet.CNIFlannel, CNIMode: clusternet.FlannelHostGW, KubeProxyMode: "iptables"}},
		Cells: []*results.Cell{
			cell("host", "pod", "", 2), cell("fl", "host", "cross-node", 0),
			cell("host-gw", "pod", "", 2), cell("fl", "pod", "cross-node", 0),
			labelled("host-1node", "host", nil), cell("fl", "host", "same-node", 0),
			labelled("bridge-1node", "bridge", nil), cell("fl", "pod", "same-node", 0),
			labelled("bridge-nf-off", "bridge", map[string]string{"bridge_nf_call_iptables": "off"}),
		}}
	lab, cluster, ok := SplitLabCluster(mixed)
	if !ok || len(lab.Cells) != 5 || len(cluster.Cells) != 4 || lab.Metadata.Cluster != nil || cluster.Metadata.Cluster == nil {
		t.Fatalf("split: ok %v, lab %+v, cluster %+v", ok, lab, cluster)
	}
	var got []string
	for _, d := range Diff(lab, cluster).Deltas {
		got = append(got, d.Name())
	}
	want := []string{"host|pod||tcp_rr ~ fl|host||tcp_rr|@cross-node", "host-gw|pod||tcp_rr ~ fl|pod||tcp_rr|@cross-node",
		"host-1node|pod||tcp_rr ~ fl|host||tcp_rr|@same-node", "bridge-1node|pod||tcp_rr ~ fl|pod||tcp_rr|@same-node"}
	if !slices.Equal(got, want) {
		t.Errorf("matched\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, _, ok := SplitLabCluster(&results.File{Metadata: mixed.Metadata, Cells: cluster.Cells}); ok {
		t.Error("a cluster-only file split")
	}
	if _, _, ok := SplitLabCluster(lab); ok {
		t.Error("a lab-only file split")
	}
}

// A kube run with kube.lab and a policies sweep: each lab cell is paired
// with the cluster's at the same point, only when its policy provider has
// the data path of the cluster's enforcer (vnetlab's on veth-ebpf: ebpf);
// a file whose cluster names no lab provider pairs no policy cell.
func TestDiffLabAgainstClusterPolicies(t *testing.T) {
	cell := func(mode, placement, provider, point string, v float64) *results.Cell {
		c := cellOf(mode, v, v, v, v)
		c.Path, c.Placement, c.PolicyProvider, c.Point, c.Test = "pod", placement, provider, point, "tcp_crr"
		return c
	}
	cl := &results.Cluster{Name: "k", CNI: "vnetlab veth-ebpf + host-local", CNIPlugin: clusternet.CNIVnetlab, CNIMode: "veth-ebpf",
		KubeProxyMode: "vnetlab-ebpf", NetworkPolicy: clusternet.PolicyVnetlab, PolicyLabProvider: "ebpf"}
	mixed := &results.File{Metadata: results.Metadata{Cluster: cl}, Cells: []*results.Cell{
		cell("veth-ebpf", "", "ebpf", "policies=0", 10), cell("k", "same-node", "", "policies=0", 8),
		cell("veth-ebpf", "", "ebpf", "policies=1000", 20), cell("k", "same-node", "", "policies=1000", 16),
		cell("veth-ebpf", "", "nftables", "policies=1000", 20),
	}}
	lab, cluster, ok := SplitLabCluster(mixed)
	if !ok {
		t.Fatal("not split")
	}
	fd := Diff(lab, cluster)
	var got []string
	for _, d := range fd.Deltas {
		got = append(got, d.Name())
		if !within(d.Pct(), -20, 1e-9) {
			t.Errorf("%s: %g%%, want -20%% (each point against its own)", d.Name(), d.Pct())
		}
	}
	want := []string{"veth-ebpf|pod||tcp_crr|:ebpf|{policies=0} ~ k|pod||tcp_crr|@same-node|{policies=0}", "veth-ebpf|pod||tcp_crr|:ebpf|{policies=1000} ~ k|pod||tcp_crr|@same-node|{policies=1000}"}
	if !slices.Equal(got, want) || len(fd.OnlyOld) != 1 || fd.OnlyOld[0].PolicyProvider != "nftables" {
		t.Errorf("matched\n%s\nwant\n%s\n(%d lab cells unmatched, want the nftables one)", strings.Join(got, "\n"), strings.Join(want, "\n"), len(fd.OnlyOld))
	}
	if !strings.Contains(fd.Note, "policy provider ebpf = NetworkPolicy enforcer vnetlab") {
		t.Errorf("note: %q", fd.Note)
	}
	cl.PolicyLabProvider = "" // a file before version 4, or no enforcer
	if fd := Diff(lab, cluster); len(fd.Deltas) != 0 {
		t.Errorf("without the cluster's lab provider: %d pairs, want none", len(fd.Deltas))
	}
}
