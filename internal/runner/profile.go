package runner

import (
	"fmt"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Profiling (run --profile): every sample's measured window is
// sampled (cpu-clock stacks of all CPUs, data-path tracepoints); a cell's
// valid samples are merged into its profile, summarised per unit of work in
// results (cell.profile) and written as pprof, folded stacks and a flame
// graph into Spec.ProfileDir.

// openProfiler opens the sampler when the spec asks for profiles.
func openProfiler(spec Spec) (*profile.Collector, error) {
	if !spec.Profile {
		return nil, nil
	}
	c, err := profile.NewCollector(spec.ProfileHz)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return c, nil
}

// labNamespaces are a lab's network namespaces: its nodes', its pods' and
// the external one.
func labNamespaces(l *lab.Lab) []string {
	ns := []string{l.State.Ext}
	for _, n := range l.State.Nodes {
		ns = append(ns, n.NS)
	}
	for _, p := range l.State.Pods {
		ns = append(ns, p.NS)
	}
	return ns
}

// workUnits is the work a sample did in the profile's unit: transactions or
// connections (rr, crr), MB received (streams).
func workUnits(res engine.Result, unit string) float64 {
	if profile.UnitOf(unit) == "MB" {
		return res.Bytes / 1e6
	}
	return res.Transfers
}

// finishProfiles summarises each cell's profile and writes its files.
func finishProfiles(col *profile.Collector, cells []*results.Cell, dir string) error {
	if dir == "" {
		dir = "."
	}
	for _, c := range cells {
		p, units := col.Cell(c.ID().Key())
		if p == nil {
			continue
		}
		unit := profile.UnitOf(c.Unit)
		c.Profile = ProfileOf(profile.Summarize(p, profile.DefaultRules, units, unit))
		usPer := 0.0
		if units > 0 && p.Hz > 0 {
			usPer = 1e6 / float64(p.Hz) / units
		}
		title := fmt.Sprintf("%s %s %s: data-path CPU per %s", c.Mode, c.Path, c.Test, unit)
		if c.Provider != "" {
			title = fmt.Sprintf("%s %s(%s) %s: data-path CPU per %s", c.Mode, c.Path, c.Provider, c.Test, unit)
		}
		files, err := profile.WriteFiles(dir, profile.FileName(c.ID().Key()), title, p, profile.DefaultRules, usPer, unit)
		if err != nil {
			return fmt.Errorf("profile of %s: %w", c.ID(), err)
		}
		c.Profile.Dir, c.Profile.Files = filepath.ToSlash(dir), filesOf(files)
	}
	return nil
}
