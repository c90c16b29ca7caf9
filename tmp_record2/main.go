package main

import (
	"os"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// re-summarise a results file's profiles from their folded stacks with the current rules
func main() {
	in, out := os.Args[1], os.Args[2]
	f, err := results.Read(in)
	if err != nil {
		panic(err)
	}
	for _, c := range f.Cells {
		if c.Profile == nil {
			continue
		}
		p, _, err := profile.LoadStacks(filepath.Dir(in), c.Profile)
		if err != nil {
			panic(err)
		}
		p.CPUs, p.WallSec = c.Profile.CPUs, c.Profile.WallSec
		for _, e := range c.Profile.Events {
			p.Events[e.Name] = e.Count
		}
		s := profile.Summarize(p, profile.DefaultRules, c.Profile.Units, c.Profile.Unit)
		s.Dir, s.Files = c.Profile.Dir, c.Profile.Files
		c.Profile = s
	}
	if err := results.Write(out, f); err != nil {
		panic(err)
	}
}
