package scenario

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// RunSpec is the run the file describes for `run -f`: spec (the defaults,
// runner.DefaultSpec) with every field the file sets replaced.
func (s *Scenario) RunSpec(spec runner.Spec) runner.Spec {
	modes := s.Modes
	if s.Mode != "" {
		modes = append(modes, runner.ModeVariant{Label: s.Mode, Mode: s.Mode, Options: s.Options})
	}
	if len(modes) > 0 {
		spec.Modes = modes
	}
	if len(s.Tests) > 0 {
		spec.Tests = nil
		for _, t := range s.Tests {
			spec.Tests = append(spec.Tests, engine.Test(t)) // checked by Parse
		}
	}
	if len(s.Paths) > 0 {
		spec.Paths = s.Paths
	}
	setString(&spec.Engine, s.Engine)
	if s.CPUAffinity != "" {
		spec.CPUAffinity, _ = cpupin.Parse(s.CPUAffinity) // checked by Parse
	}
	spec.Duration = s.DurationValue(spec.Duration)
	setInt(&spec.Repeat, s.Repeat)
	setInt(&spec.Warmup, s.Warmup)
	setString(&spec.Order, s.Order)
	if s.OrderSeed != nil {
		spec.OrderSeed = *s.OrderSeed
	}
	if s.Precision != "" {
		spec.Summary.Precision, _ = runner.ParseShare(s.Precision) // checked by Parse
	}
	if s.MaxTime != "" {
		spec.MaxTime, _ = time.ParseDuration(s.MaxTime) // checked by Parse
	}
	spec.Duet = spec.Duet || s.Duet
	for _, k := range knob.All {
		if v, ok := s.Knobs[k.Name]; ok {
			k.Set(&spec.Settings, v) // checked by Parse
		}
	}
	if len(s.Sweep.Axes) > 0 {
		spec.Sweep = s.Sweep
	}
	spec.Sweep.Cross = spec.Sweep.Cross || s.SweepCross
	if s.Pods != nil {
		spec.Pods = s.Pods
	}
	setInt(&spec.PodCount, s.PodCount)
	setString(&spec.PodCIDR, s.PodCIDR)
	setInt(&spec.Nodes, s.Nodes)
	setFamily(&spec.Family, s.IPFamily)
	setString(&spec.PodCIDR6, s.PodCIDR6)
	setString(&spec.UnderlayRate, s.UnderlayRate)
	switch {
	case len(s.Providers) > 0:
		spec.Providers = s.Providers
	case s.Provider != "":
		spec.Providers = []string{s.Provider}
	}
	if len(s.Services) > 0 {
		spec.Services = s.Services
	}
	if len(s.ExtraServices) > 0 {
		spec.ExtraServices = s.ExtraServices
	}
	if len(s.PolicyProviders) > 0 {
		spec.PolicyProviders = s.PolicyProviders
	}
	setString(&spec.Summary.Baseline, s.Baseline)
	setString(&spec.Summary.CIMethod, s.CIMethod)
	if s.CVThreshold != nil {
		spec.Summary.CVThreshold = *s.CVThreshold
	}
	if s.Profile || s.ProfileDir != "" {
		spec.Profile = true
	}
	setString(&spec.ProfileDir, s.ProfileDir)
	if len(s.Cells) > 0 {
		spec.Cells = s.Cells
	}
	return spec
}

// Lab is what `up` builds: one lab and the Services loaded into it.
type Lab struct {
	Spec     lab.Spec
	PodCount int               // pods when Spec.Pods is empty (lab.DefaultPodSpecs)
	Provider string            // "": no Services
	Extra    int               // generated Services loaded besides Services
	Services []labservice.Spec // default: the service path's (labservice.NewConfig)
}

// Validate refuses a bad `up` before anything is built (lab.Up checks the
// lab's own spec), and gives a lab without a pod list its default pods.
func (l *Lab) Validate() error {
	if l.Provider == "" && (l.Extra != 0 || len(l.Services) > 0) {
		return field.Errorf("provider", "services need a provider: add {provider} (%s)", labservice.NameList())
	}
	if l.Provider != "" {
		if err := labservice.CheckExtra(l.Extra); err != nil {
			return field.Errorf("extra_services", "{extra_services} %v", err)
		}
		if err := labservice.CheckFamily(l.Provider, l.Spec.Family); err != nil {
			return err
		}
		if l.Spec.Mode != "" {
			m, err := modes.Get(l.Spec.Mode)
			if err != nil {
				return err
			}
			if err := labservice.Check(l.Provider, m); err != nil {
				return err
			}
		}
	}
	if l.Spec.Mode == "" {
		return field.Errorf("mode", "no mode given: use {mode} (one of %s)", strings.Join(modes.Names(), ", "))
	}
	if l.Spec.Pods != nil {
		return nil
	}
	var err error
	l.Spec.Pods, err = lab.PodsFor(l.PodCount, l.Spec)
	return err
}

// DefaultLab is a plain `vnetlab up --mode M`: lab "lab" with seed 002's
// two pods.
func DefaultLab() Lab {
	return Lab{Spec: lab.Spec{Name: "lab", PodCIDR: lab.DefaultPodCIDR, Family: family.IPv4, Options: map[string]string{}}, PodCount: lab.DefaultPods}
}

// LabSpec is the lab the file describes for `up -f`: l (the defaults) with
// every field the file sets replaced. `up` builds one lab, so a file that
// lists several modes or counts of extra services is refused.
func (s *Scenario) LabSpec(l Lab) (Lab, error) {
	if err := s.ForLabs("up"); err != nil {
		return l, err
	}
	mode, options := s.Mode, s.Options
	if mode == "" && len(s.Modes) == 1 {
		mode, options = s.Modes[0].Mode, s.Modes[0].Options
	}
	if mode == "" {
		return l, fmt.Errorf("%s: `up` builds one lab: give `mode:` (the file lists %d modes: use `vnetlab run -f`)", s.file, len(s.Modes))
	}
	if len(s.ExtraServices) > 1 {
		return l, fmt.Errorf("%s: extra_services lists %d counts; `up` builds one lab: give one number (lists are for `vnetlab run -f`)", s.file, len(s.ExtraServices))
	}
	l.Spec.Mode = mode
	l.Spec.Options = maps.Clone(l.Spec.Options)
	if l.Spec.Options == nil {
		l.Spec.Options = map[string]string{}
	}
	maps.Copy(l.Spec.Options, options)
	setString(&l.Spec.Name, s.Name)
	setString(&l.Spec.PodCIDR, s.PodCIDR)
	setFamily(&l.Spec.Family, s.IPFamily)
	setString(&l.Spec.PodCIDR6, s.PodCIDR6)
	if s.Pods != nil {
		l.Spec.Pods = s.Pods
	}
	setInt(&l.PodCount, s.PodCount)
	setInt(&l.Spec.Nodes, s.Nodes)
	setString(&l.Spec.UnderlayRate, s.UnderlayRate)
	setString(&l.Provider, s.Provider)
	if len(s.Services) > 0 {
		l.Services = s.Services
	}
	if len(s.ExtraServices) == 1 {
		l.Extra = s.ExtraServices[0]
	}
	return l, nil
}

// setFamily sets dst to the family v names, when it names one (checked by Parse).
func setFamily(dst *family.Family, v string) {
	if v != "" {
		*dst, _ = family.Parse(v)
	}
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}
