package profile

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// WritePprof writes p as a gzipped pprof profile (go tool pprof, speedscope):
// sample types samples/count and cpu/nanoseconds; each sample labelled
// with its process (comm) and stage.
func WritePprof(w io.Writer, p *Profile, r *Rules) error {
	period := int64(0)
	if p.Hz > 0 {
		period = int64(time.Second) / int64(p.Hz)
	}
	out := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        period,
		DurationNanos: int64(p.WallSec * 1e9),
	}
	funcs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := funcs[name]; ok {
			return l
		}
		fn := &profile.Function{ID: uint64(len(out.Function) + 1), Name: name, SystemName: name}
		out.Function = append(out.Function, fn)
		l := &profile.Location{ID: uint64(len(out.Location) + 1), Line: []profile.Line{{Function: fn}}}
		out.Location = append(out.Location, l)
		funcs[name] = l
		return l
	}
	for _, st := range p.Stacks {
		frames := FunctionFrames(st)
		s := &profile.Sample{
			Value: []int64{int64(st.Count), int64(st.Count) * period},
			Label: map[string][]string{"comm": {st.Process()}, "stage": {r.Attribute(st)}},
		}
		for i := len(frames) - 1; i >= 0; i-- { // leaf first
			s.Location = append(s.Location, loc(frames[i]))
		}
		out.Sample = append(out.Sample, s)
	}
	if err := out.CheckValid(); err != nil {
		return fmt.Errorf("pprof profile: %w", err)
	}
	return out.Write(w)
}

// WriteFolded writes p as folded stacks, one "comm;root;...;leaf count" line
// per distinct stack (FlameGraph's flamegraph.pl, speedscope, inferno); the
// comm of a process in a lab's namespace ends in LabSuffix.
func WriteFolded(w io.Writer, p *Profile) error {
	lines := make([]string, 0, len(p.Stacks))
	for _, st := range p.Stacks {
		lines = append(lines, fmt.Sprintf("%s %d", strings.Join(append([]string{st.Process()}, FunctionFrames(st)...), ";"), st.Count))
	}
	sort.Strings(lines)
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
