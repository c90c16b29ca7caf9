package engine

import "context"

// A measurement window is the part of Driver.Run that is the measurement
// itself: from just before the client starts until it has finished, without
// the server's start-up and the wait for it to listen. The runner snapshots
// CPU counters at both ends. A driver reports its window by calling
// MeasureStart and MeasureEnd with the ctx it was given; a driver that does
// not is measured around its whole Run (slightly more CPU charged: the
// server's start and stop).

type windowKey struct{}

// Window receives the two marks. Calls are made from the driver's goroutine.
type Window interface {
	Start()
	End()
}

// WithWindow returns a ctx that carries w to the driver, inside any window
// ctx already carries: MeasureStart reaches the outer one first and
// MeasureEnd reaches it last, so an inner window sees only what happens
// between the outer one's marks (a test's probe inside the runner's).
func WithWindow(ctx context.Context, w Window) context.Context {
	if outer, ok := ctx.Value(windowKey{}).(Window); ok {
		w = nested{outer: outer, inner: w}
	}
	return context.WithValue(ctx, windowKey{}, w)
}

type nested struct{ outer, inner Window }

func (n nested) Start() { n.outer.Start(); n.inner.Start() }
func (n nested) End()   { n.inner.End(); n.outer.End() }

// MeasureStart marks the start of the measured part (call right before the
// client runs). A no-op when nobody listens.
func MeasureStart(ctx context.Context) {
	if w, ok := ctx.Value(windowKey{}).(Window); ok {
		w.Start()
	}
}

// MeasureEnd marks the end of the measured part (call right after the client
// has exited, before stopping the server).
func MeasureEnd(ctx context.Context) {
	if w, ok := ctx.Value(windowKey{}).(Window); ok {
		w.End()
	}
}
