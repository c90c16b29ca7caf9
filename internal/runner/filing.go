package runner

// The one boundary between the measuring packages and the results file:
// what an engine, the profiler, the packet counter, the knobs, a cell's
// policy prover and a converge run produce in their own types becomes
// internal/results' types here, a file per source (filing_engine.go,
// filing_knob.go, filing_policy.go, filing_converge.go, ...), so that a
// field renamed in any of them never changes the file's format
// (results.TestSchemaGolden pins that format). Where the two types have the same fields the
// conversion is Go's own, so that a field added on one side only fails to
// compile here; where they differ, TestFilingKeepsEveryField fills every
// field of the source and finds it, under the same JSON name, in the
// results' type.
