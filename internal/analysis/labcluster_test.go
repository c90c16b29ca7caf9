package analysis

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
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
	cluster.Metadata.Cluster.CNI = "cilium"
	if fd := Diff(lab, cluster); len(fd.Deltas) != 1 || !strings.Contains(fd.Note, `no lab mode has the shape of CNI "cilium"`) {
		t.Errorf("cilium: %d deltas, note %q", len(fd.Deltas), fd.Note)
	}
}
