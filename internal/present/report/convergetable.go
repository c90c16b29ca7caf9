package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// ConvergeRun is one convergence file, named for the table.
type ConvergeRun struct {
	File string
	C    *results.Convergence
	// tag tells the run's line from another of its proxy (qualify).
	tag string
}

// qualify tags the runs that their proxy, E, pause and N alone would
// merge: a proxy measured on more than one CNI data path ("on veth-ebpf":
// bench-converge's SHARED kube-proxy beside its per-proxy clusters'), and
// a run measured again ("run 2", "run 3", in the order they started:
// SHARED's -again runs).
func qualify(runs []ConvergeRun) {
	paths := map[string]map[string]bool{}
	for _, r := range runs {
		if r.C.PolicyProvider != "" {
			continue // its key names its path already
		}
		if paths[r.C.Proxy] == nil {
			paths[r.C.Proxy] = map[string]bool{}
		}
		paths[r.C.Proxy][cniPath(r.C)] = true
	}
	for i := range runs {
		runs[i].tag = ""
		if p := cniPath(runs[i].C); runs[i].C.PolicyProvider == "" && len(paths[runs[i].C.Proxy]) > 1 && p != "" {
			runs[i].tag = "on " + p
		}
	}
	type point struct {
		k convergeKey
		n int
	}
	seen := map[point][]int{}
	for i := range runs {
		k, n := keyOf(runs[i])
		seen[point{k, n}] = append(seen[point{k, n}], i)
	}
	for _, idx := range seen {
		slices.SortStableFunc(idx, func(a, b int) int { return runs[a].C.Start.Compare(runs[b].C.Start) })
		for j, i := range idx[1:] {
			runs[i].tag = strings.TrimPrefix(runs[i].tag+fmt.Sprintf(", run %d", j+2), ", ")
		}
	}
}

// cniPath is the data path a run's proxy worked on: the CNI's mode, or the
// CNI ("" when not recorded).
func cniPath(c *results.Convergence) string {
	if c.Cluster == nil {
		return ""
	}
	return cmp.Or(c.Cluster.CNIMode, c.Cluster.CNIPlugin)
}

// convergeKey is a line of the scale table: a proxy with E endpoints per
// other Service, its changes paced by pause (a proxy with a minimum sync
// period reads its period under a short pause, a change's own cost under
// a long one); its points are N.
type convergeKey struct {
	proxy string
	eps   int
	pause string
}

func keyOf(r ConvergeRun) (convergeKey, int) {
	c := r.C
	pause := converge.PauseOf(c.Pause)
	if c.PolicyProvider != "" { // a policy's apply latency: its enforcer (or lab provider), N policies
		what := "policy " + c.PolicyProvider
		if c.Cluster != nil && c.Cluster.CNIMode != "" {
			what += " on " + c.Cluster.CNIMode
		}
		return convergeKey{tagged(what, r.tag), 0, pause}, c.Policies
	}
	if c.Scale == nil {
		return convergeKey{tagged(c.Proxy, r.tag), 1, pause}, 0
	}
	return convergeKey{tagged(c.Proxy, r.tag), c.Scale.Endpoints, pause}, c.Scale.Services
}

func tagged(proxy, tag string) string {
	if tag == "" {
		return proxy
	}
	return proxy + " (" + tag + ")"
}

// label names a line of the chart: its pause only when not the default.
func (k convergeKey) label() string {
	l := fmt.Sprintf("%s, E=%d", k.proxy, k.eps)
	if k.pause != converge.DefaultPause {
		l += ", pause " + k.pause
	}
	return l
}

// crrBase is the key of k's tcp_crr base: the same proxy's run at N = 0,
// at any pause and E (no other Service, so no endpoints of them: E is a
// count of nothing there; neither changes tcp_crr).
func (k convergeKey) crrBase() convergeKey { k.pause, k.eps = "", 0; return k }

// sortRuns orders runs by proxy, endpoints, pause, N.
func sortRuns(runs []ConvergeRun) {
	slices.SortStableFunc(runs, func(a, b ConvergeRun) int {
		ka, na := keyOf(a)
		kb, nb := keyOf(b)
		return cmp.Or(cmp.Compare(ka.proxy, kb.proxy), cmp.Compare(ka.eps, kb.eps), cmp.Compare(ka.pause, kb.pause), cmp.Compare(na, nb))
	})
}

// row is a run's all-nodes row of one kind.
func row(c *results.Convergence, kind string) (results.ConvergeRow, bool) {
	for _, r := range c.Rows {
		if r.Kind == kind && r.Node == "all nodes" {
			return r, true
		}
	}
	return results.ConvergeRow{}, false
}

// PrintConvergeTable prints the scale table of many convergence runs (one
// per proxy, N and E): per kind, the slowest node's p50 and p99 with their
// CIs, the changes not applied and those shown before their write; the
// write calls' p50 (the API server's share) and the latency after the
// write's answer (p50 and p99: the proxy's watch, its sync and the data
// path); the proxies' own metric (p50) and how
// many of its values said done before a packet showed it; the agents'
// CPU seconds and RSS (summed over nodes: the proxies, or for a policy's
// changes the policy controllers) while N was made and during the
// changes; the planes' eBPF maps (the proxy's, and all: the CNI's routing
// and the policy enforcer's too); tcp_crr to the newest Service as a
// ratio to the same proxy's run at N = 0 (ratio of medians, 95%
// bootstrap CI; the runs are sequential, not interleaved); and the
// machine's other work during the changes, with the changes it disturbed.
func PrintConvergeTable(w io.Writer, runs []ConvergeRun, kinds []string) {
	qualify(runs)
	sortRuns(runs)
	base := map[convergeKey]*results.Convergence{} // by proxy (crrBase)
	for _, r := range runs {
		if k, n := keyOf(r); n == 0 && r.C.CRR != nil {
			base[k.crrBase()] = cmp.Or(base[k.crrBase()], r.C)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tE\tPAUSE\tN\tKIND\tCHANGES\tNOT APPLIED\tSHOWN BEFORE\tP50 MS\tP99 MS\tWRITE P50 MS\tAFTER WRITE P50 / P99 MS\tMETRIC P50 MS\tMETRIC EARLY\tGONE CONNS BROKEN\tCONNS BROKEN\tAGENT CPU S (MAKE/CHANGES)\tAGENT RSS MB\tAPI+ETCD RSS MB\tBPF MAPS MB (PROXY / ALL)\tTCP_CRR/N=0\tOTHER WORK CPU S")
	for _, r := range runs {
		k, n := keyOf(r)
		u := useOf(r.C)
		for _, kind := range kinds {
			cr, ok := row(r.C, kind)
			if !ok {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.proxy, k.eps, k.pause, n, kind, cr.Changes, cr.NotApplied, cr.ShownBefore,
				ms(cr.P50), ms(cr.P99), writeP50(cr), afterWrite(r.C, kind, analysis.AllNodes), metricP50(cr), early(cr), ofHeld(cr.GoneConnsBroken, cr.GoneConnsStalled, cr.GoneConnsHeld), ofHeld(cr.ConnsBroken, cr.ConnsStalled, cr.ConnsHeld),
				u.proxyCPU, u.proxyRSS, u.apiRSS, u.bpf, crrRatio(r.C, base[k.crrBase()]), otherWorkCell(r.C))
		}
	}
	tw.Flush()
	printControllerShares(w, runs)
}

// printControllerShares is the EndpointSlice controller's share of the
// runs that measured it (kube converge --controller-changes), apart.
func printControllerShares(w io.Writer, runs []ConvergeRun) {
	if !slices.ContainsFunc(runs, func(r ConvergeRun) bool { return r.C.Controller != nil }) {
		return
	}
	fmt.Fprintln(w, "\nthe EndpointSlice controller's share, apart (a pod's label written, to its Service's slice seen in a watch):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tE\tPAUSE\tN\tCHANGES\tNOT SEEN\tP50 MS\tP99 MS")
	for _, r := range runs {
		if ctl := r.C.Controller; ctl != nil {
			k, n := keyOf(r)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", k.proxy, k.eps, k.pause, n, ctl.Changes, ctl.NotApplied, ms(ctl.P50), ms(ctl.P99))
		}
	}
	tw.Flush()
}

func metricP50(r results.ConvergeRow) string {
	if r.Metric == nil {
		return "-"
	}
	return ms(*r.Metric)
}

// use is a run's daemons' use as the table shows it.
type use struct{ proxyCPU, proxyRSS, apiRSS, bpf string }

func useOf(c *results.Convergence) use {
	u := use{"-", "-", "-", "-"}
	if c.Scale == nil || len(c.Scale.Use) == 0 {
		return u
	}
	var makeCPU, chCPU, proxyRSS, apiRSS float64
	// The agents are the nodes' proxies for Service changes, their policy
	// controllers for a policy's (the daemons' names end in the role).
	role := " proxy"
	if c.PolicyProvider != "" {
		role = " netpol"
	}
	for _, d := range c.Scale.Use {
		if api := d.Daemon == "etcd" || d.Daemon == "kube-apiserver"; !api && !strings.HasSuffix(d.Daemon, role) {
			continue
		}
		proxy := strings.HasSuffix(d.Daemon, role)
		switch {
		case proxy && d.Phase == results.PhaseCreate:
			makeCPU += d.CPUSeconds
		case proxy && d.Phase == results.PhaseChanges:
			chCPU += d.CPUSeconds
		}
		if d.Phase == results.PhaseIdle {
			if proxy {
				proxyRSS += float64(d.RSS)
			} else {
				apiRSS += float64(d.RSS)
			}
		}
	}
	u.proxyCPU = fmt.Sprintf("%.1f / %.1f", makeCPU, chCPU)
	if c.Scale.Services > 0 && c.Scale.Reused >= c.Scale.Services {
		// The run made no Service: the proxy programmed the kept ones
		// before it (kube set-proxy's first sync, or an earlier run).
		u.proxyCPU = fmt.Sprintf("- / %.1f", chCPU)
	}
	u.proxyRSS = fmt.Sprintf("%.0f", proxyRSS/(1<<20))
	u.apiRSS = fmt.Sprintf("%.0f", apiRSS/(1<<20))
	if c.Scale.BPFMapBytes > 0 {
		proxy := "-" // a file from before the parts
		if b, ok := c.Scale.BPFMapParts[results.MapPartProxy]; ok {
			proxy = fmt.Sprintf("%.1f", float64(b)/(1<<20))
		}
		u.bpf = fmt.Sprintf("%s / %.1f", proxy, float64(c.Scale.BPFMapBytes)/(1<<20))
	}
	return u
}

// crrRatio is c's newest-Service tcp_crr over base's (N = 0).
func crrRatio(c, base *results.Convergence) string {
	if c.CRR == nil || base == nil || base.CRR == nil {
		return "-"
	}
	m, b := stats.Median(c.CRR.Rates), stats.Median(base.CRR.Rates)
	if b == 0 {
		return "-"
	}
	if lo, hi, ok := stats.RatioOfMediansCI(c.CRR.Rates, base.CRR.Rates); ok {
		return fmt.Sprintf("%.3f [%.3f, %.3f]", m/b, lo, hi)
	}
	return fmt.Sprintf("%.3f", m/b)
}

// ConvergeChart is kind's p99 (the slowest node's, with its CI) against N,
// one line per proxy and E, vnetlab's own proxies' first: N on a log axis
// (0 one decade left of the smallest other), the latency on a log axis
// too (milliseconds to seconds apart).
func ConvergeChart(runs []ConvergeRun, kind string) *CurveChart {
	qualify(runs)
	sortRuns(runs)
	var ns []int
	for _, r := range runs {
		if _, n := keyOf(r); !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	ch := &CurveChart{Title: "network programming latency, " + kind + ": p99 of the slowest node (95% CI)", Unit: "ms (log)", XLabel: "other Services (log scale)", LogY: true}
	for _, n := range ns {
		ch.X = append(ch.X, strconv.Itoa(n))
	}
	ch.XAt = logPositions(ns)
	lines := map[convergeKey]int{}
	for _, r := range runs {
		k, n := keyOf(r)
		li, ok := lines[k]
		if !ok {
			li = len(ch.Lines)
			lines[k] = li
			pts := make([]CurvePoint, len(ns))
			for i := range pts {
				pts[i].Missing = true
			}
			ch.Lines = append(ch.Lines, CurveLine{Label: k.label(), Points: pts, Knee: -1, Own: ownProxy(r.C)})
		}
		cr, ok := row(r.C, kind)
		if !ok {
			continue
		}
		p := CurvePoint{Value: cr.P99.Value / 1000, Lo: cr.P99.CI[0] / 1000, Hi: cr.P99.CI[1] / 1000, HasCI: cr.P99.CI != [2]float64{},
			Tip: fmt.Sprintf("%s N=%d: p99 %s ms, %d of %d not applied", ch.Lines[li].Label, n, ms(cr.P99), cr.NotApplied, cr.Changes)}
		if cr.Changes == cr.NotApplied {
			p.Failed = true
		}
		ch.Lines[li].Points[slices.Index(ns, n)] = p
	}
	slices.SortStableFunc(ch.Lines, func(a, b CurveLine) int { return cmpBool(b.Own, a.Own) })
	return ch
}

// ownProxy says whether c measured one of vnetlab's own proxies (its lines
// come first and bolder).
func ownProxy(c *results.Convergence) bool {
	return c.PolicyProvider == "" && clusternet.IsVnetlab(clusternet.FromText("", c.Proxy).Proxy)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// logPositions places counts on a log axis in [0, 1]: 0 one decade left
// of the smallest positive count.
func logPositions(ns []int) []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, n := range ns {
		if n > 0 {
			lo, hi = math.Min(lo, math.Log10(float64(n))), math.Max(hi, math.Log10(float64(n)))
		}
	}
	if math.IsInf(lo, 1) {
		return nil
	}
	lo--
	if hi <= lo {
		hi = lo + 1
	}
	out := make([]float64, len(ns))
	for i, n := range ns {
		v := lo
		if n > 0 {
			v = math.Log10(float64(n))
		}
		out[i] = (v - lo) / (hi - lo)
	}
	return out
}
