package main

import (
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Flags over a scenario file over the defaults, written once for every
// command: a command binds its flags to its typed spec, each flag's default
// being the spec's value (runner.DefaultSpec's for --help). To resolve, it
// starts from the defaults, lets the scenario file replace what it sets,
// binds a second flag set to that spec (the file's values become its
// defaults) and overlays every flag the command line gave. A new knob is a
// file of internal/measure/knob registering it in knob.All (its flag is
// bound from there, registerKnobFlags; its scenario key from there too,
// scenario.decodeKnobs): no switch to extend.

// overlay sets on to every flag the command line set in from.
func overlay(from, to *pflag.FlagSet) error {
	var err error
	from.Visit(func(f *pflag.Flag) {
		t := to.Lookup(f.Name)
		if t == nil || err != nil {
			return
		}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			err = t.Value.(pflag.SliceValue).Replace(s.GetSlice())
		} else {
			err = t.Value.Set(f.Value.String())
		}
		t.Changed = true
	})
	return err
}

// inputErr names the fields of err as the user gave them: as the scenario
// file's keys where the file (sc, nil: none) set them and no flag did, else
// as flags.
func inputErr(err error, given *pflag.FlagSet, sc *scenario.Scenario) error {
	return field.Rendered(err, func(key string) string {
		if flag := field.Flag(key); sc == nil || given.Changed(flag[2:]) || !sc.Sets(key) {
			return flag
		}
		return key + " (" + sc.File() + ")"
	})
}
