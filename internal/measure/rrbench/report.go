package rrbench

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
)

// ReadyPrefix starts the line rr-server prints once it accepts clients.
const ReadyPrefix = "rr-server ready"

// ParseReport reads `rr-client -o json` output.
func ParseReport(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("rr-client output is not its JSON report: %w", err)
	}
	if r.Proto == "" || r.Mode == "" {
		return nil, fmt.Errorf("rr-client output has no proto/mode: not an rr-client report")
	}
	if r.Transactions > 0 && len(r.Latency) == 0 {
		return nil, fmt.Errorf("rr-client report has %d transactions but no latency", r.Transactions)
	}
	return &r, nil
}

// Text is the human-readable report.
func (r *Report) Text() string {
	var b strings.Builder
	unit := "trans/s"
	if r.Mode == "crr" {
		unit = "conn/s"
	}
	fmt.Fprintf(&b, "%s_%s size %d B: %d in %.3f s = %.1f %s", r.Proto, r.Mode, r.Size, r.Transactions, r.Seconds, r.Rate, unit)
	if r.Errors > 0 {
		fmt.Fprintf(&b, ", %d errors (first: %s)", r.Errors, r.FirstError)
	}
	if r.Proto == "udp" {
		fmt.Fprintf(&b, ", %d lost", r.Lost)
	}
	if o := r.Open; o != nil {
		fmt.Fprintf(&b, "\nopen loop: offered %.0f/s over %d flows, achieved %.1f/s (%.2f%%); %d of %d scheduled sent, %d late (>= %s), largest lag %.0f us",
			o.Offered, o.Flows, r.Rate, 100*r.Rate/o.Offered, o.Sent, o.Scheduled, o.Late, LateAfter, o.MaxLagUs)
		if o.Behind {
			fmt.Fprintf(&b, "; BEHIND its schedule: %.1f%% of requests sent late or not at all", 100*o.LateShare())
		}
	}
	b.WriteString("\nlatency us")
	if r.Open != nil {
		b.WriteString(" (from intended send times)")
	}
	b.WriteString(":")
	for _, k := range LatencyKeys {
		if v, ok := r.Latency[k]; ok {
			fmt.Fprintf(&b, " %s %.1f", k, v)
			continue
		}
		if i := slices.IndexFunc(results.LatencyQuantiles, func(q results.Quantile) bool { return q.Key == k }); i >= 0 && r.LatencySamples > 0 {
			fmt.Fprintf(&b, " %s too few samples (%d < %d)", k, r.LatencySamples, results.LatencyQuantiles[i].MinSamples())
		}
	}
	fmt.Fprintf(&b, " (%d samples)", r.LatencySamples)
	b.WriteString("\n")
	return b.String()
}
