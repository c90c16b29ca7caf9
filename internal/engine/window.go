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

// WithWindow returns a ctx that carries w to the driver.
func WithWindow(ctx context.Context, w Window) context.Context {
	return context.WithValue(ctx, windowKey{}, w)
}

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
