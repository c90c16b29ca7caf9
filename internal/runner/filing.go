package runner

import (
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The one boundary between the measuring packages and the results file:
// what an engine, the knobs, the packet counter and the profiler produce
// in their own types becomes internal/results' types here, so that a
// field renamed in any of them never changes the file's format
// (results.TestSchemaGolden pins that format).

// resultOf is an engine's result as a sample records it.
func resultOf(r engine.Result) results.Result {
	return results.Result{Value: r.Value, Retransmits: r.Retransmits, LossPct: r.LossPct, Transfers: r.Transfers,
		Bytes: r.Bytes, Latency: r.Latency, Errors: r.Errors}
}
