package explain

import (
	"fmt"
	"os"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// WriteFlameGraph writes p.B's differential flame graph against p.A to out
// (SVG): B's data-path stacks, red where B spends more µs per unit than A,
// blue where less. resultsDir holds the profile files run wrote beside the
// results; out is created only once both cells' stacks are loaded.
func WriteFlameGraph(out, resultsDir string, p Pair) error {
	load := func(c *results.Cell) (*profile.Profile, float64, error) {
		s, us, err := profile.LoadStacks(resultsDir, c.Profile)
		if err != nil {
			return nil, 0, fmt.Errorf("cell %s: %w", Label(c), err)
		}
		return s, us, nil
	}
	pb, usB, err := load(p.B)
	if err != nil {
		return err
	}
	pa, usA, err := load(p.A)
	if err != nil {
		return err
	}
	o := profile.FlameOptions{USPerSample: usB, Unit: p.B.Profile.Unit, Base: pa, BaseUSPerSample: usA, BaseTitle: Label(p.A)}
	o.Title = fmt.Sprintf("%s vs %s %s: red = more µs per %s than %s, blue = less", Label(p.B), Label(p.A), p.B.Test, o.Unit, Label(p.A))
	fh, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := profile.WriteFlameGraph(fh, pb, profile.DefaultRules, o); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
