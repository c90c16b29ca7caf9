package runner

import (
	"context"
	"fmt"
	"sync"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// A duet run (--duet) measures the two modes' cells of each coordinate at
// the same time, each with its client and server on a CPU of its own, the
// CPUs swapped every round: whatever the machine does to one round (a
// neighbour's burst, a frequency change) it does to both paths, and the
// round's ratio cancels it. Its cells are marked (Placement "duet"): a
// path beside another is not the path alone, so their values are never
// matched with solo cells (another Key), only with each other.
//
// Where it holds: request/response and connection tests, each confined
// to its CPU (a veth's receive runs on the sender's CPU). Streams are
// refused: each saturates its CPU and both share the memory bus and the
// cache, so what one path costs the other is most of what a duet of two
// streams would measure.

// duetCPUs are the CPUs a duet's two sides run on: the last two allowed.
func duetCPUs(allowed []int) ([2]int, error) {
	if len(allowed) < 2 {
		return [2]int{}, field.Errorf("duet", "{duet} needs two CPUs, one for each path, and this process may use %d (%v): the two paths would share one CPU", len(allowed), allowed)
	}
	return [2]int{allowed[len(allowed)-2], allowed[len(allowed)-1]}, nil
}

// checkDuet refuses a duet that cannot hold: not two modes, a stream test,
// --profile (its samples are the machine's, not a path's), pins of the
// user's (a duet pins each side itself), or fewer than two CPUs.
func (spec Spec) checkDuet(allowed []int) error {
	if !spec.Duet {
		return nil
	}
	if len(spec.Modes) != 2 {
		return field.Errorf("duet", "{duet} measures two modes at once, and %d are given: name two with --modes (the first is the baseline)", len(spec.Modes))
	}
	for _, t := range spec.Tests {
		if !t.RequestResponse() {
			return field.Errorf("duet", "{duet} refuses %s: two streams each saturate a CPU and share the memory bus, so the duet would measure their interference; run streams without --duet", t)
		}
	}
	if spec.Profile {
		return field.Errorf("duet", "{duet} cannot profile: a duet's CPU samples hold both paths")
	}
	if !spec.CPUAffinity.IsAuto() {
		return field.Errorf("duet", "{duet} pins each side to a CPU of its own: leave --cpu-affinity at auto")
	}
	_, err := duetCPUs(allowed)
	return err
}

// duetPairs are the cells of a duet run two by two: the baseline mode's
// cell and the other mode's cell of the same coordinates.
func duetPairs(cells []Planned, baseline string) ([][2]Planned, error) {
	others := map[results.CellID]Planned{}
	for _, c := range cells {
		if c.Cell.Mode != baseline {
			id := c.Cell.ID()
			id.Mode = ""
			others[id] = c
		}
	}
	var out [][2]Planned
	for _, c := range cells {
		if c.Cell.Mode != baseline {
			continue
		}
		id := c.Cell.ID()
		id.Mode = ""
		o, ok := others[id]
		if !ok {
			return nil, fmt.Errorf("duet: %s has no partner of the other mode", c.Cell.ID())
		}
		delete(others, id)
		out = append(out, [2]Planned{c, o})
	}
	for id := range others {
		return nil, fmt.Errorf("duet: %s/%s has no partner of the baseline mode", id.Series(), id.Test)
	}
	return out, nil
}

// duetRound runs one measured round of a duet: the pairs in the round's
// order, each pair's two samples at once, the baseline's side on the
// second CPU in odd rounds and on the first in even ones. A pair either
// of whose cells has policies not proven in force is not measured.
func (rr *roundRunner) duetRound(ctx context.Context) error {
	cpus, err := duetCPUs(mustAllowed())
	if err != nil {
		return err
	}
	locked := &lockedProgress{Progress: rr.prog}
	for slot, pr := range deal(rr.order, rr.pairs) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if notInForce(pr[0]) || notInForce(pr[1]) {
			continue
		}
		var pins [2]cpupin.Pins
		for side, c := range pr {
			cpu := cpus[(side+rr.measured)%2]
			pins[side] = cpupin.Pins{Pinned: true, Client: cpu, Server: cpu}
			rr.step++
			rr.prog.Sample(rr.step, fmt.Sprintf("%s (duet, CPU %d)", c.Cell.ID(), cpu))
		}
		var wg sync.WaitGroup
		for side, c := range pr {
			wg.Go(func() {
				sample(ctx, rr.spec, c, measuredRound, locked, nil, nil, rr.pc, place{round: rr.measured, slot: slot + 1, pins: &pins[side]})
			})
		}
		wg.Wait()
	}
	return nil
}

// mustAllowed is the CPUs this process may use (checked by Validate).
func mustAllowed() []int {
	a, _ := cpupin.Allowed()
	return a
}

// lockedProgress lets a duet's two samples note at once.
type lockedProgress struct {
	mu sync.Mutex
	Progress
}

func (p *lockedProgress) Note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Progress.Note(format, args...)
}
