package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

func kubeCell(mode, path, provider, test string, extra int, values ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: path, Provider: provider, Placement: "same-node", Test: test, Unit: "conn/s", ExtraServices: extra}
	for _, v := range values {
		c.Samples = append(c.Samples, results.Sample{Valid: true, Result: results.Result{Value: v}})
	}
	c.Valid, c.Median = len(values), values[len(values)/2]
	return c
}

// A run over several clusters gets one row per configuration (and
// placement): medians and clusterIP/podIP, extra-Services columns last.
func TestConfigTable(t *testing.T) {
	f := &results.File{Metadata: results.Metadata{Clusters: []results.Cluster{
		{Name: "ipt", CNI: "bridge+host-local", KubeProxyMode: "iptables"},
		{Name: "ebpf", CNI: "bridge+host-local", KubeProxyMode: "vnetlab-ebpf"}}},
		Cells: []*results.Cell{
			kubeCell("ipt", "pod", "", "tcp_crr", 0, 100, 100, 100),
			kubeCell("ipt", "service", "iptables", "tcp_crr", 0, 90, 90, 90),
			kubeCell("ebpf", "pod", "", "tcp_crr", 0, 100, 100, 100),
			kubeCell("ebpf", "service", "vnetlab-ebpf", "tcp_crr", 0, 99, 99, 99),
			kubeCell("ebpf", "pod", "", "tcp_crr", 10000, 100, 100, 100),
			kubeCell("ebpf", "service", "vnetlab-ebpf", "tcp_crr", 10000, 96, 96, 96),
		}}
	tab := buildConfigTable(f)
	if tab == nil || len(tab.Rows) != 2 {
		t.Fatalf("table: %+v", tab)
	}
	if got := strings.Join(tab.Header, "|"); !strings.Contains(got, "tcp_crr clusterIP/podIP [95% CI]|tcp_crr +10000 Services podIP") {
		t.Errorf("header: %s", got)
	}
	if got := strings.Join(tab.Rows[0], "|"); got != "ipt|bridge+host-local|iptables|same-node|100.0 conn/s|90.0 conn/s|0.900 [0.900, 0.900]|-|-|-" {
		t.Errorf("row ipt: %s", got)
	}
	if got := strings.Join(tab.Rows[1], "|"); !strings.HasSuffix(got, "|0.990 [0.990, 0.990]|100.0 conn/s|96.0 conn/s|0.960 [0.960, 0.960]") {
		t.Errorf("row ebpf: %s", got)
	}
	var out bytes.Buffer
	Summary(&out, f)
	if !strings.Contains(out.String(), "configurations: medians") {
		t.Errorf("summary of a multi-cluster run:\n%s", out.String())
	}
	if buildConfigTable(&results.File{Cells: f.Cells}) != nil {
		t.Error("a file without clusters got a configuration table")
	}
}
