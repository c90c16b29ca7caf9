package results

import (
	"fmt"
	"strings"
)

// CellID is what makes a cell one cell of the matrix: the same CellID in two
// results files is the same measurement, and within one run it names the cell
// in progress lines, tables, reports and errors. It is comparable, so it can
// key a map directly.
type CellID struct {
	Mode          string // mode label (a scenario's "bridge-nf-off" is mode bridge)
	Path          string // pod, service, published, ...
	Provider      string // Service provider of a service path; "" otherwise
	ExtraServices int    // generated Services loaded besides the tested ones
	// Placement says where the two pods run when the platform chooses (the
	// Kubernetes work fills it, e.g. "cross-node"); "" for vnetlab's labs.
	Placement string
	Test      string
}

// ID is the cell's identity.
func (c *Cell) ID() CellID {
	return CellID{Mode: c.Mode, Path: c.Path, Provider: c.Provider, ExtraServices: c.ExtraServices, Placement: c.Placement, Test: c.Test}
}

// Series names the cell within its mode and test: its path, with the
// provider and generated services of a service path and the placement when
// there is one: "pod", "service(iptables)", "service(nftables+1000)@cross-node".
func (id CellID) Series() string {
	s := id.Path
	if id.Provider != "" || id.ExtraServices > 0 {
		p := id.Provider
		if id.ExtraServices > 0 {
			p += fmt.Sprintf("+%d", id.ExtraServices)
		}
		s += "(" + p + ")"
	}
	if id.Placement != "" {
		s += "@" + id.Placement
	}
	return s
}

// String is the name people read: mode/series/test, e.g.
// "bridge/service(iptables+1000)/tcp_crr".
func (id CellID) String() string {
	return strings.Join([]string{id.Mode, id.Series(), id.Test}, "/")
}

// Key matches cells across files (compare): mode|path|provider|test, then
// |+N for generated services and |@placement when set. Files written before
// these fields existed give the same keys.
func (id CellID) Key() string {
	k := strings.Join([]string{id.Mode, id.Path, id.Provider, id.Test}, "|")
	if id.ExtraServices > 0 {
		k += fmt.Sprintf("|+%d", id.ExtraServices)
	}
	if id.Placement != "" {
		k += "|@" + id.Placement
	}
	return k
}
