package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/results"
)

// resultOf is an engine's result as a sample records it.
func resultOf(r engine.Result) results.Result {
	return results.Result{
		Value:          r.Value,
		Retransmits:    r.Retransmits,
		LossPct:        r.LossPct,
		Transfers:      r.Transfers,
		Bytes:          r.Bytes,
		Latency:        r.Latency,
		LatencySamples: r.LatencySamples,
		Errors:         r.Errors,
		Schedule:       scheduleOf(r.Schedule),
	}
}

// scheduleOf is an open-loop sample's schedule as the file records it
// (nil: closed loop).
func scheduleOf(s *engine.Schedule) *results.Schedule {
	if s == nil {
		return nil
	}
	out := results.Schedule(*s)
	return &out
}
