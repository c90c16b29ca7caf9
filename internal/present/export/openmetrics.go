package export

import (
	"io"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// Metric names follow Prometheus's conventions: a vnetlab_ prefix, base
// units (bytes, seconds) spelled out at the end of the name, no _total
// (nothing here counts up: every value is one run's measurement, a gauge),
// and the cell's coordinates as labels (results.CoordinateNames).
const namespace = "vnetlab_"

// quantity is how a test's unit is exposed: the family's stem, its unit
// suffix and the factor from vnetlab's unit to it.
type quantity struct {
	stem, unit string
	scale      float64
	help       string
	omUnit     bool // the suffix is an OpenMetrics unit (bytes, seconds), written as # UNIT
}

var quantities = map[string]quantity{
	"Gbit/s":  {"throughput", "bytes_per_second", 1e9 / 8, "Median throughput of the cell's valid samples (iperf3 Gbit/s × 1.25e8)", true},
	"trans/s": {"transactions", "per_second", 1, "Median request/response transactions per second of the cell's valid samples", false},
	"conn/s":  {"connections", "per_second", 1, "Median connections (connect, request, response, close) per second of the cell's valid samples", false},
}

// otherQuantity is a unit this table does not know yet: the value as is,
// with the unit as a label.
var otherQuantity = quantity{"measurement", "", 1, "Median of the cell's valid samples, in the unit its label gives", false}

// CellsOpenMetrics writes the run's cells as OpenMetrics text (which the
// Prometheus text parser and `promtool check metrics` read too): per cell
// its median and 95% CI in base units, CV, sample counts, status (one
// series per status, 1 for the cell's), CPU cost per byte or transaction
// and latency percentiles; and the run's metadata as vnetlab_run_info.
func CellsOpenMetrics(w io.Writer, f *results.File) error {
	for _, mf := range MetricFamilies(f) {
		if _, err := expfmt.MetricFamilyToOpenMetrics(w, mf); err != nil {
			return err
		}
	}
	_, err := expfmt.FinalizeOpenMetrics(w)
	return err
}

// families collects metric families in the order they are first used.
type families struct {
	byName map[string]*dto.MetricFamily
	order  []string
}

func (fs *families) add(name, help, unit string, value float64, labels []*dto.LabelPair) {
	mf, ok := fs.byName[name]
	if !ok {
		mf = &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
		if unit != "" {
			mf.Unit = proto.String(unit)
		}
		fs.byName[name] = mf
		fs.order = append(fs.order, name)
	}
	mf.Metric = append(mf.Metric, &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(value)}})
}

// MetricFamilies is the exposition of f, one gauge family per quantity.
func MetricFamilies(f *results.File) []*dto.MetricFamily {
	fs := &families{byName: map[string]*dto.MetricFamily{}}
	m := f.Metadata
	fs.add(namespace+"run_info", "The run's machine and vnetlab version (value 1)", "", 1,
		pairs("vnetlab_version", m.Vnetlab, "kernel", m.Kernel, "cpus", strconv.Itoa(m.CPUs)))
	if !m.Start.IsZero() {
		fs.add(namespace+"run_start_timestamp_seconds", "When the run started (Unix time)", "seconds", float64(m.Start.UnixNano())/1e9, nil)
	}
	for _, c := range f.Cells {
		cell := cellLabels(c.ID())
		st := analysis.StatusOf(c)
		for _, s := range analysis.Statuses() {
			v := 0.0
			if s == st {
				v = 1
			}
			fs.add(namespace+"cell_status", "The cell's outcome against the run's prediction: 1 for its status, 0 for the others", "", v,
				with(cell, "status", s.String()))
		}
		fs.add(namespace+"cell_valid_samples", "Valid samples of the cell", "", float64(c.Valid), cell)
		fs.add(namespace+"cell_failed_samples", "Failed samples of the cell (never counted in its statistics)", "", float64(c.Failed), cell)
		if c.Valid == 0 {
			continue
		}
		q, ok := quantities[c.Unit]
		labels := cell
		if !ok {
			q, labels = otherQuantity, with(cell, "unit", c.Unit)
		}
		name := func(part string) string {
			n := namespace + q.stem + part
			if q.unit != "" {
				n += "_" + q.unit
			}
			return n
		}
		unit := ""
		if q.omUnit {
			unit = q.unit
		}
		fs.add(name(""), q.help, unit, c.Median*q.scale, labels)
		if len(c.CI95) == 2 {
			fs.add(name("_ci95_low"), "Lower end of the 95% CI of the cell's median ("+c.CIMethod+")", unit, c.CI95[0]*q.scale, labels)
			fs.add(name("_ci95_high"), "Upper end of the 95% CI of the cell's median ("+c.CIMethod+")", unit, c.CI95[1]*q.scale, labels)
		}
		if c.Valid >= 2 {
			fs.add(namespace+"cell_cv_ratio", "Coefficient of variation (stddev/mean) of the cell's valid samples", "", c.CV, cell)
		}
		if p := c.CPU; p != nil {
			if p.PerGB > 0 {
				fs.add(namespace+"cell_cpu_seconds_per_byte", "Whole-machine busy CPU time per byte moved (median over samples)", "", p.PerGB/1e9, cell)
			}
			if p.PerKTrans > 0 {
				fs.add(namespace+"cell_cpu_seconds_per_transaction", "Whole-machine busy CPU time per transaction (median over samples)", "", p.PerKTrans/1000, cell)
			}
			nodeCPU(fs, p, cell)
		}
		keys := make([]string, 0, len(c.Latency))
		for k := range c.Latency {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fs.add(namespace+"cell_latency_seconds", "Request/response latency reported by the engine, by statistic (median over samples)", "seconds",
				c.Latency[k]/1e6, with(cell, "stat", k))
		}
	}
	out := make([]*dto.MetricFamily, len(fs.order))
	for i, n := range fs.order {
		out[i] = fs.byName[n]
	}
	return out
}

// nodeCPU adds a cluster cell's CPU per unit of work on each node, by
// class (user, system, softirq: the node's busy time per unit, split in
// the proportions of its medians).
func nodeCPU(fs *families, p *results.CPUCost, cell []*dto.LabelPair) {
	nodes := make([]string, 0, len(p.Nodes))
	for n := range p.Nodes {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		c := p.Nodes[n]
		if c.BusySec == 0 {
			continue
		}
		for _, per := range []struct {
			name, help string
			value      float64
		}{
			{"cell_node_cpu_seconds_per_byte", "A Kubernetes node's busy CPU time per byte moved, by class (median over samples)", c.PerGB / 1e9},
			{"cell_node_cpu_seconds_per_transaction", "A Kubernetes node's busy CPU time per transaction, by class (median over samples)", c.PerKTrans / 1000},
		} {
			if per.value == 0 {
				continue
			}
			k := per.value / c.BusySec
			for _, cl := range []struct {
				class string
				sec   float64
			}{{"user", c.UserSec}, {"system", c.SystemSec}, {"softirq", c.SoftirqSec}} {
				fs.add(namespace+per.name, per.help, "", cl.sec*k, with(with(cell, "node", n), "class", cl.class))
			}
		}
	}
}

// cellLabels are the cell's coordinates as labels, named as in the results JSON.
func cellLabels(id results.CellID) []*dto.LabelPair {
	var kv []string
	for _, co := range id.Coordinates() {
		kv = append(kv, co.Name, co.Value)
	}
	return pairs(kv...)
}

func pairs(kv ...string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
	}
	return out
}

// with is labels plus one more pair (a new slice: the cell's are shared).
func with(labels []*dto.LabelPair, name, value string) []*dto.LabelPair {
	return append(slices.Clone(labels), pairs(name, value)...)
}
