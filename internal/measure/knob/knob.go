// Package knob is the vocabulary of the knobs users turn: a message size,
// a number of streams, the links' MTU, their GSO and GRO maximum sizes
// (BIG TCP), their offloads, the pods' qdisc and TCP congestion control,
// background load, an offered rate and NetworkPolicies. A knob is one file
// of this package (size.go, mtu.go, qdisc.go, ...): a Knob value declaring
// its name, scope, range, help and, for a lab knob, how it is applied to a
// lab and proven there (Applier), registered from that file. A sweep
// (sweep.go) crosses several values of knobs into points, each point a cell
// coordinate (results.CellID.Point). Where each knob's value lives is
// Settings (settings.go), which runner.Spec embeds: an engine or cluster
// knob's in its field, a lab knob's in Settings.Lab by name.
package knob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Name is a knob's name, as flags, scenario keys and points spell it.
type Name string

// Scope is where a knob's value acts.
type Scope int

const (
	// Engine: the engine takes it per sample, so cells of one lab differ
	// in it (size, streams, load, rate); kube run takes it too.
	Engine Scope = iota
	// Lab: set on a lab once its mode has built it, and proven there
	// (Applier): a lab per value; a cluster's are its CNI's, so kube run
	// refuses it.
	Lab
	// Cluster: a set of objects the lab, or a cluster's namespace, holds
	// (the policy knobs: Settings.Policy), loaded by a policy provider or
	// a cluster's enforcer: a lab, or a namespace, per value.
	Cluster
)

// Knob is one knob, declared whole in a file of its own (mtu.go, qdisc.go,
// ...) and registered there: its name, scope, help, its values' check
// (canonical), where an engine or cluster knob's value lives in Settings
// (intField or stringField; a lab knob's lives in Settings.Lab, by name),
// and how a lab knob is applied and proven (Applier).
type Knob struct {
	Name  Name
	Scope Scope
	// Help is its plain flag's help (--NAME).
	Help string
	// Example is a value in its range (tests, docs).
	Example string
	// Unit follows a value where one is shown ("size 64 B"; "": none).
	Unit string
	// Whole: its values are whole numbers (a flag of type int).
	Whole bool
	// RequestResponseOnly: the knob changes only rr/crr tests (load);
	// other tests are measured at its base value only.
	RequestResponseOnly bool
	// canonical checks a value and spells it one way ("" = invalid).
	canonical func(string) (string, error)
	// intField or stringField is where an engine or cluster knob's value
	// lives (a lab knob has neither: Settings.Lab holds it).
	intField    func(*Settings) *int
	stringField func(*Settings) *string
	// check refuses a plain value in its own words (nil: canonical's,
	// CheckValue).
	check func(value string) error
	// Applier sets a lab knob on a lab and reads it back (apply.go).
	Applier Applier
	// order is its place in All (help, errors, the proof's order).
	order int
}

// All are the knobs, in the order help and errors list them; each
// registers itself from its file (register).
var All []Knob

// register adds k to All, in its order; a name registered twice, or a
// lab knob without its Applier, is a programming error.
func register(k Knob) {
	if slices.ContainsFunc(All, func(o Knob) bool { return o.Name == k.Name }) {
		panic("knob " + string(k.Name) + " registered twice")
	}
	if (k.Scope == Lab) != (k.Applier != nil) {
		panic("knob " + string(k.Name) + ": a lab knob, and only one, has an Applier")
	}
	i, _ := slices.BinarySearchFunc(All, k, func(a, b Knob) int { return a.order - b.order })
	All = slices.Insert(All, i, k)
}

// Get is the knob named n.
func Get(n string) (Knob, error) {
	for _, k := range All {
		if string(k.Name) == n {
			return k, nil
		}
	}
	return Knob{}, fmt.Errorf("unknown knob %q (knobs: %s)", n, NameList())
}

// NameList is the knobs' names, comma-separated.
func NameList() string {
	var n []string
	for _, k := range All {
		n = append(n, string(k.Name))
	}
	return strings.Join(n, ", ")
}

// Default is the value of a lab knob that leaves the links as the
// mode built them (in a sweep: the untouched lab, e.g. mtu: [default, 9000]).
const Default = "default"

// Canonical checks v as a value of k and spells it one way.
func (k Knob) Canonical(v string) (string, error) {
	v = strings.TrimSpace(v)
	if k.Scope == Lab && v == Default {
		return Default, nil
	}
	return k.canonical(v)
}

// Int is a numeric knob's value (0 when v is not a number, as Default).
func Int(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

func intIn(n Name, lo, hi int, hiWhat string) func(string) (string, error) {
	return func(v string) (string, error) {
		x, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Errorf("%s %q is not a whole number", n, v)
		}
		if x < lo {
			return "", fmt.Errorf("%s %d is below the minimum %d", n, x, lo)
		}
		if x > hi {
			if hiWhat != "" {
				return "", fmt.Errorf("%s %d is above %d, %s", n, x, hi, hiWhat)
			}
			return "", fmt.Errorf("%s %d is above the maximum %d", n, x, hi)
		}
		return strconv.Itoa(x), nil
	}
}

// CheckValue checks one value of knob named n (a plain flag or key, not a
// sweep): "" or the knob's zero mean "not set".
func CheckValue(n Name, v string) error {
	k, err := Get(string(n))
	if err != nil {
		return err
	}
	if v == "" || v == "0" {
		return nil
	}
	_, err = k.Canonical(v)
	return err
}

// IsLinks says whether the knob named n is a lab knob: set on a lab once
// built (a lab per value).
func IsLinks(n Name) bool {
	k, err := Get(string(n))
	return err == nil && k.Scope == Lab
}

// IsPolicy says whether the knob named n is a policy knob (policies,
// ipblocks): a cost axis, where more never helps.
func IsPolicy(n Name) bool {
	k, err := Get(string(n))
	return err == nil && k.Scope == Cluster
}

// IsPolicyAxis says whether the axis written key (a knob, or knobs joined
// by +: "policies+ipblocks") sweeps policy knobs.
func IsPolicyAxis(key string) bool {
	return slices.ContainsFunc(strings.Split(key, "+"), func(n string) bool { return IsPolicy(Name(n)) })
}

// LabOnly says whether a knob is a lab's own setting (its links, its
// policies), whose flag only run binds (kube run refuses a lab knob and
// takes the policy knobs from a sweep or its scenario).
func (k Knob) LabOnly() bool { return k.Scope != Engine }

// LinksNames lists the lab knobs, comma-separated (for errors).
func LinksNames() string {
	var s []string
	for _, k := range All {
		if k.Scope == Lab {
			s = append(s, string(k.Name))
		}
	}
	return strings.Join(s, ", ")
}

// sortedNames orders knob names as All does.
func sortedNames(ns []Name) []Name {
	out := slices.Clone(ns)
	slices.SortFunc(out, func(a, b Name) int { return index(a) - index(b) })
	return out
}

func index(n Name) int {
	for i, k := range All {
		if k.Name == n {
			return i
		}
	}
	return len(All)
}
