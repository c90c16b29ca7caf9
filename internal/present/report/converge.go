package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// PrintConvergence prints a `kube converge` table: per kind of change and
// node, the latencies' p50/p90/p99 with their 95% CIs and the largest, in
// ms, how many changes a node did not apply and how many its probes
// showed before their write (a fault of the measurement), the write calls'
// p50 and the latency after the write's answer (p50 and p99), the proxy's own metric for
// the same changes (and how many it says were done before the first probe
// showed them), and the connections held open at the writes that broke.
func PrintConvergence(w io.Writer, c *results.Convergence) {
	what := "network programming latency, proxy " + c.Proxy
	switch {
	case c.PolicyProvider != "" && c.Cluster != nil: // kube converge --policy
		what = fmt.Sprintf("policy apply latency, NetworkPolicy enforcer %s (proxy %s), %d other policies present", c.PolicyProvider, c.Proxy, c.Policies)
	case c.PolicyProvider != "":
		what = fmt.Sprintf("policy apply latency, policy provider %s, %d policies and %d ipblocks present", c.PolicyProvider, c.Policies, c.IPBlocks)
	}
	flows := "the kernel's"
	if c.ProbeConntrackTimeoutS > 0 {
		flows = fmt.Sprintf("%d s", c.ProbeConntrackTimeoutS)
	}
	fmt.Fprintf(w, "%s: %d changes, each %s after the last was shown, probes every %d µs (the resolution; their flows' conntrack timeout %s), %s\n",
		what, len(c.Changes), converge.PauseOf(c.Pause), c.IntervalUS, flows, c.End.Sub(c.Start).Round(1e9))
	// The proxy's metric and the kept connections are columns only when
	// some row has them (a lab's floor or policy apply latency has neither).
	metrics := slices.ContainsFunc(c.Rows, func(r results.ConvergeRow) bool { return r.Metric != nil || r.Metrics > 0 })
	conns := slices.ContainsFunc(c.Rows, func(r results.ConvergeRow) bool { return r.ConnsHeld > 0 || r.GoneConnsHeld > 0 })
	writes := slices.ContainsFunc(c.Rows, func(r results.ConvergeRow) bool { return r.Write != nil })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "KIND\tNODE\tCHANGES\tNOT APPLIED\tSHOWN BEFORE\tP50 MS\tP90 MS\tP99 MS\tMAX MS"
	if writes {
		head += "\tWRITE P50 MS\tAFTER WRITE P50 / P99 MS"
	}
	if metrics {
		head += "\tMETRIC P50/P99 MS\tMETRIC EARLY"
	}
	if conns {
		head += "\tCONNS BROKEN\tGONE CONNS BROKEN"
	}
	fmt.Fprintln(tw, head)
	for _, r := range c.Rows {
		line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f", r.Kind, r.Node, r.Changes, r.NotApplied, r.ShownBefore, ms(r.P50), ms(r.P90), ms(r.P99), r.MaxUS/1000)
		if writes {
			line += "\t" + writeP50(r) + "\t" + afterWrite(c, r.Kind, r.Node)
		}
		if metrics {
			line += "\t" + metricText(r) + "\t" + early(r)
		}
		if conns {
			line += "\t" + ofHeld(r.ConnsBroken, r.ConnsStalled, r.ConnsHeld) + "\t" + ofHeld(r.GoneConnsBroken, r.GoneConnsStalled, r.GoneConnsHeld)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	object := "the Service"
	if c.PolicyProvider != "" {
		object = "the policies' probed pod"
	}
	printNotApplied(w, c.Changes, object)
	printGaps(w, c)
	if sc := c.Scale; sc != nil {
		fmt.Fprintf(w, "background: %d other Services with %d endpoints each (%d reused, the rest made in %.0f s)", sc.Services, sc.Endpoints, sc.Reused, sc.CreateSeconds)
		if sc.APIBytesPerService > 0 {
			fmt.Fprintf(w, "; API server + etcd grew %.1f KB per Service", sc.APIBytesPerService/1024)
		}
		if sc.BPFMapBytes > 0 {
			fmt.Fprintf(w, "; eBPF maps of the nodes' planes %.1f MB", float64(sc.BPFMapBytes)/(1<<20))
			sep := ": "
			for _, part := range []string{results.MapPartProxy, results.MapPartRouting, results.MapPartPolicy, results.MapPartOther} {
				if b, ok := sc.BPFMapParts[part]; ok {
					fmt.Fprintf(w, "%s%s %.1f", sep, part, float64(b)/(1<<20))
					sep = ", "
				}
			}
		}
		fmt.Fprintln(w)
		if len(sc.Use) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "DAEMON\tPHASE\tSECONDS\tCPU SECONDS\tRSS MB\tPEAK RSS MB")
			for _, u := range sc.Use {
				fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.0f\t%.0f\n", u.Daemon, u.Phase, u.Seconds, u.CPUSeconds, float64(u.RSS)/(1<<20), float64(u.PeakRSS)/(1<<20))
			}
			tw.Flush()
		}
	}
	printOtherWork(w, c)
	if c.CRR != nil {
		fmt.Fprintf(w, "tcp_crr to the newest Service %s: median %.0f connections/s of %d samples of %.0f s, CPU pins %s\n", c.CRR.Target, stats.Median(c.CRR.Rates), len(c.CRR.Rates), c.CRR.Seconds, cmp.Or(c.CRR.Pins, cpupinNone))
	}
	if ctl := c.Controller; ctl != nil {
		fmt.Fprintf(w, "the EndpointSlice controller's share, apart (a pod's label written, to its Service's slice seen in a watch; %d changes): p50 %s ms, p99 %s ms, max %.1f ms", ctl.Changes, ms(ctl.P50), ms(ctl.P99), ctl.MaxUS/1000)
		if ctl.NotApplied > 0 {
			fmt.Fprintf(w, "; %d not seen within the change timeout", ctl.NotApplied)
		}
		fmt.Fprintln(w)
	}
	for _, n := range slices.Sorted(maps.Keys(c.ProxySyncs)) {
		s := c.ProxySyncs[n]
		fmt.Fprintf(w, "%s: the proxy reported %d syncs, mean %.2f ms (kubeproxy_sync_proxy_rules_duration_seconds)", n, s.Syncs, s.MeanUS/1000)
		if s.Reconciles > 0 {
			fmt.Fprintf(w, "; its conntrack reconciler ran %d times, mean %.2f ms (kubeproxy_conntrack_reconciler_sync_duration_seconds)", s.Reconciles, s.ReconcileMeanUS/1000)
		}
		if s.ConntrackEntries > 0 {
			fmt.Fprintf(w, "; %d conntrack entries on the node after the changes", s.ConntrackEntries)
		}
		fmt.Fprintln(w)
	}
}

// cpupinNone is what a file without the client's and server's CPUs had:
// unpinned (cpupin.None).
const cpupinNone = "none"

// ms is a quantile and its CI in milliseconds.
func ms(q results.QuantileCI) string {
	if q.CI == [2]float64{} {
		return fmt.Sprintf("%.1f", q.Value/1000)
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f]", q.Value/1000, q.CI[0]/1000, q.CI[1]/1000)
}

// metricText is the proxy's own network programming duration for a row's
// changes, or "-" where it reported none (a Service's write has no
// EndpointSlice trigger time; a cluster whose proxies were not scraped).
func metricText(r results.ConvergeRow) string {
	if r.Metric == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f", r.Metric.Value/1000, r.MetricP99.Value/1000)
}

// writeP50 is the p50 of a row's write calls (the writer's share of the
// latency), "-" in a file from before they were timed.
func writeP50(r results.ConvergeRow) string {
	if r.Write == nil {
		return "-"
	}
	return ms(*r.Write)
}

// afterWrite is the p50 and p99 (with its CI) of a kind's latencies on
// node n less their write calls: the part after the API server's answer.
func afterWrite(c *results.Convergence, kind, n string) string {
	p50, p99, ok := analysis.AfterWrite(c.Changes, kind, n)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f / %s", p50.Value/1000, ms(p99))
}

// early is how many of a row's metrics said done more than two probe
// intervals before the first probe showed the change.
func early(r results.ConvergeRow) string {
	if r.Metrics == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d", r.MetricEarly, r.Metrics)
}

// ofHeld is how many of the connections held broke, and how many of the
// others stalled (a line answered later than the probe timeout).
func ofHeld(broken, stalled, held int) string {
	switch {
	case held == 0:
		return "-"
	case stalled > 0:
		return fmt.Sprintf("%d of %d (%d stalled)", broken, held, stalled)
	}
	return fmt.Sprintf("%d of %d", broken, held)
}

// notAppliedLines is how many not-applied changes are named one by one.
const notAppliedLines = 10

// printNotApplied names the changes some node did not show within the
// change timeout: the change, its object (the probed address) and the nodes.
// (object: what the address is, the Service or a policy's probed pod).
func printNotApplied(w io.Writer, changes []results.Change, object string) {
	n := 0
	for _, ch := range changes {
		if len(ch.NotApplied) == 0 {
			continue
		}
		if n++; n <= notAppliedLines {
			fmt.Fprintf(w, "not applied: change %d (%s of %s at %s) on %s\n", ch.Seq, ch.Kind, object, ch.Target, strings.Join(ch.NotApplied, ", "))
		}
	}
	if n > notAppliedLines {
		fmt.Fprintf(w, "not applied: %d more changes (the -o file names each)\n", n-notAppliedLines)
	}
}

// printGaps is each node's p50 for the changes written within
// analysis.RateLimitGap of the node showing the previous one, and for the
// later ones: a proxy with a minimum sync period holds the first group.
func printGaps(w io.Writer, c *results.Convergence) {
	gaps := analysis.SplitByGap(c)
	if len(gaps) == 0 {
		return
	}
	fmt.Fprintf(w, "p50 ms by the time from a node showing a change to the next change's write, under %s / %s or more (kube-proxy syncs at most once per minSyncPeriod, 1 s by default: it holds the first):", analysis.RateLimitGap, analysis.RateLimitGap)
	for i, g := range gaps {
		sep := "; "
		if i == 0 {
			sep = " "
		}
		fmt.Fprintf(w, "%s%s %s (%d) / %s (%d)", sep, g.Node, msOr(g.Soon, g.NSoon), g.NSoon, msOr(g.Later, g.NLater), g.NLater)
	}
	fmt.Fprintln(w)
}

// msOr is q in ms with its CI, "-" for no changes.
func msOr(q results.QuantileCI, n int) string {
	if n == 0 {
		return "-"
	}
	return ms(q)
}

// printOtherWork is what the machine's other processes used during c's
// phases, and a warning naming the changes they may have delayed.
func printOtherWork(w io.Writer, c *results.Convergence) {
	o := c.OtherWork
	if o == nil {
		return
	}
	fmt.Fprintf(w, "other work on this machine (outside the measured cluster or lab and vnetlab): %.1f CPU s during the changes", o.Phases[results.PhaseChanges])
	if busiest, ok := analysis.BusiestOtherWork(c); ok {
		fmt.Fprintf(w, " (%.2f%% of a CPU; its busiest %.0f s: %.2f CPUs)", 100*o.Phases[results.PhaseChanges]/o.ChangesSeconds(), float64(busiest.End-busiest.Start)/1e9, busiest.CPUs())
	}
	for _, ph := range []string{results.PhaseCreate, results.PhaseIdle} {
		if v, ok := o.Phases[ph]; ok {
			fmt.Fprintf(w, ", %.1f in the %s phase", v, ph)
		}
	}
	for i, n := range o.Top {
		sep := ", "
		if i == 0 {
			sep = "; by name: "
		}
		fmt.Fprintf(w, "%s%s %.1f s", sep, n.Name, n.CPUSeconds)
	}
	if o.ReadSeconds > 0 {
		fmt.Fprintf(w, "; its readings took %.2f s", o.ReadSeconds)
	}
	fmt.Fprintln(w)
	if seqs := analysis.Disturbed(c); len(seqs) > 0 {
		fmt.Fprintf(w, "warning: %d of %d changes overlapped other work above %.1f CPUs (changes %s): their latencies may be its; measure again on an idle machine\n",
			len(seqs), len(c.Changes), analysis.DisturbedCPUs, cpupin.FormatList(seqs))
	}
}

// otherWorkCell is the table's cell of c's other work: its CPU seconds
// during the changes, and how many changes it disturbed ("-": a file
// without it).
func otherWorkCell(c *results.Convergence) string {
	if c.OtherWork == nil {
		return "-"
	}
	cell := fmt.Sprintf("%.1f", c.OtherWork.Phases[results.PhaseChanges])
	if n := len(analysis.Disturbed(c)); n > 0 {
		cell += fmt.Sprintf(" (%d DISTURBED)", n)
	}
	return cell
}
