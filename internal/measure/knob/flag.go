package knob

import "strings"

// AxesFlag is the repeatable --sweep KNOB=V1,V2,... bound to a Sweep's
// axes (a pflag.SliceValue: given on the command line, it replaces a
// scenario's sweep as a whole). Each axis is checked as it is parsed.
type AxesFlag struct{ S *Sweep }

// Set adds one axis.
func (f AxesFlag) Set(s string) error {
	a, err := ParseAxisFlag(s)
	if err != nil {
		return err
	}
	f.S.Axes = append(f.S.Axes, a)
	return f.S.Check()
}

// String lists the axes as given.
func (f AxesFlag) String() string { return strings.Join(f.GetSlice(), " ") }

// Type names the value in --help.
func (f AxesFlag) Type() string { return "KNOB=V1,V2,..." }

// Append is Set (pflag.SliceValue).
func (f AxesFlag) Append(s string) error { return f.Set(s) }

// Replace sets the axes to vals.
func (f AxesFlag) Replace(vals []string) error {
	f.S.Axes = nil
	for _, v := range vals {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// GetSlice is each axis as KNOB=V1,V2.
func (f AxesFlag) GetSlice() []string {
	var out []string
	for _, a := range f.S.Axes {
		out = append(out, a.Key()+"="+strings.Join(a.Values, ","))
	}
	return out
}
