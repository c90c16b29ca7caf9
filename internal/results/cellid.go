package results

import (
	"fmt"
	"path"
	"reflect"
	"strconv"
	"strings"
)

// CellID is what makes a cell one cell of the matrix: the same CellID in two
// results files is the same measurement, and within one run it names the cell
// in progress lines, tables, reports and errors. It is comparable, so it can
// key a map directly.
//
// Each field's json tag is the coordinate's name where cells are written
// out field by field (the cell's own field in the results JSON, a CSV column,
// an OpenMetrics label: Coordinates), so a coordinate added here reaches
// every export without further edits.
type CellID struct {
	Mode          string `json:"mode"`           // mode label (a scenario's "bridge-nf-off" is mode bridge)
	Path          string `json:"path"`           // pod, service, published, ...
	Provider      string `json:"provider"`       // Service provider of a service path; "" otherwise
	ExtraServices int    `json:"extra_services"` // generated Services loaded besides the tested ones
	// PolicyProvider is the NetworkPolicy provider enforcing the lab's
	// policies (the policy knobs); "" when the run loads none.
	PolicyProvider string `json:"policy_provider"`
	// Point is the cell's place in a sweep: each swept knob's
	// value, "streams=4" or "mtu=9000,gso+gro=65536" (knob.Point); "" in a
	// run without a sweep, so files written before sweeps keep their keys.
	Point string `json:"point"`
	// Placement says where the two pods run when the platform chooses (the
	// Kubernetes work fills it, e.g. "cross-node"); "" for vnetlab's labs.
	Placement string `json:"placement"`
	// Family is the IP family the cell measured (family.Family.Cell): ""
	// for IPv4, so that files written before families existed keep their
	// names and keys, "ipv6" for IPv6.
	Family string `json:"family"`
	Test   string `json:"test"`
}

// ID is the cell's identity.
func (c *Cell) ID() CellID {
	return CellID{Mode: c.Mode, Path: c.Path, Provider: c.Provider, ExtraServices: c.ExtraServices, PolicyProvider: c.PolicyProvider, Point: c.Point, Placement: c.Placement, Family: c.Family, Test: c.Test}
}

// PodID is the cell a service cell's clusterIP is priced against (the
// table's "vs pod"): the pod path of the same mode, policy provider, sweep
// point, placement, family and test.
func (c *Cell) PodID() CellID {
	return CellID{Mode: c.Mode, Path: "pod", PolicyProvider: c.PolicyProvider, Point: c.Point, Placement: c.Placement, Family: c.Family, Test: c.Test}
}

// PodCells maps each pod-path cell of cells by its ID: where a service
// cell finds the cell of its PodID.
func PodCells(cells []*Cell) map[CellID]*Cell {
	pod := map[CellID]*Cell{}
	for _, c := range cells {
		if c.ID() == c.PodID() {
			pod[c.ID()] = c
		}
	}
	return pod
}

// Series names the cell within its mode and test: its path, with the
// provider and generated services of a service path, the policy provider,
// the placement and the sweep's point when there are: "pod",
// "service(iptables)", "service(nftables+1000)@cross-node",
// "pod{streams=4}", "pod:iptables{policies=1000}" (":" and not brackets,
// which a --cells pattern would read as a character class).
func (id CellID) Series() string {
	s := id.Path
	if id.Provider != "" || id.ExtraServices > 0 {
		p := id.Provider
		if id.ExtraServices > 0 {
			p += fmt.Sprintf("+%d", id.ExtraServices)
		}
		s += "(" + p + ")"
	}
	return s + id.marked("")
}

// marked is what Series and Key both end with: the policy provider, the
// placement and the sweep's point, those set, each with its mark
// (":iptables", "@cross-node", "{streams=4}") and after sep ("" in Series,
// "|" in Key).
func (id CellID) marked(sep string) string {
	s := ""
	if id.PolicyProvider != "" {
		s += sep + ":" + id.PolicyProvider
	}
	if id.Placement != "" {
		s += sep + "@" + id.Placement
	}
	if id.Point != "" {
		s += sep + "{" + id.Point + "}"
	}
	return s
}

// String is the name people read: mode/series/test, e.g.
// "bridge/service(iptables+1000)/tcp_crr", with the family before the
// test when it is not IPv4: "veth-routed/pod/ipv6/tcp_rr".
func (id CellID) String() string {
	if id.Family != "" {
		return strings.Join([]string{id.Mode, id.Series(), id.Family, id.Test}, "/")
	}
	return strings.Join([]string{id.Mode, id.Series(), id.Test}, "/")
}

// FamilyIPv4 is how a name spells an IPv4 cell's family where one is
// written (String leaves it out): "veth-routed/pod/ipv4/tcp_rr".
const FamilyIPv4 = "ipv4"

// Names are the names that select the cell: String, and for an IPv4 cell
// also the name with its family written out, so that a ratio of the two
// families reads alike on both sides.
func (id CellID) Names() []string {
	if id.Family != "" {
		return []string{id.String()}
	}
	v4 := strings.Join([]string{id.Mode, id.Series(), FamilyIPv4, id.Test}, "/")
	return []string{id.String(), v4}
}

// Key matches cells across files (compare): mode|path|provider|test, then
// |+N for generated services, |:policy provider, |@placement, |{point}
// and |family when set. Files written before these fields existed give the
// same keys.
func (id CellID) Key() string {
	k := strings.Join([]string{id.Mode, id.Path, id.Provider, id.Test}, "|")
	if id.ExtraServices > 0 {
		k += fmt.Sprintf("|+%d", id.ExtraServices)
	}
	k += id.marked("|")
	if id.Family != "" {
		k += "|" + id.Family
	}
	return k
}

// Coordinate is one field of a CellID, named as the results JSON names it.
type Coordinate struct {
	Name, Value string
}

// Coordinates are id's fields in declaration order, read by reflection so
// that a field added to CellID (an IP family, a sweep value) is a column or
// label of every export at once: a list kept beside the struct would be one
// more place to forget.
func (id CellID) Coordinates() []Coordinate {
	v := reflect.ValueOf(id)
	names := CoordinateNames()
	out := make([]Coordinate, len(names))
	for i, n := range names {
		out[i] = Coordinate{Name: n, Value: formatCoordinate(v.Field(i))}
	}
	return out
}

// CoordinateNames are the names of CellID's fields (their json tags), in order.
func CoordinateNames() []string {
	t := reflect.TypeFor[CellID]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}

// ParseCoordinates is the CellID whose Coordinates are values (by name);
// a name CellID does not have is an error, a missing one stays zero.
func ParseCoordinates(values map[string]string) (CellID, error) {
	var id CellID
	v := reflect.ValueOf(&id).Elem()
	index := map[string]int{}
	for i, n := range CoordinateNames() {
		index[n] = i
	}
	for name, s := range values {
		i, ok := index[name]
		if !ok {
			return id, fmt.Errorf("%q is not a cell coordinate (coordinates: %s)", name, strings.Join(CoordinateNames(), ", "))
		}
		if err := parseCoordinate(v.Field(i), s); err != nil {
			return id, fmt.Errorf("coordinate %s: %w", name, err)
		}
	}
	return id, nil
}

func formatCoordinate(f reflect.Value) string {
	switch f.Kind() {
	case reflect.String:
		return f.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(f.Bool())
	}
	return fmt.Sprint(f.Interface())
}

func parseCoordinate(f reflect.Value, s string) error {
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.SetBool(b)
	default:
		return fmt.Errorf("cannot parse a %s", f.Kind())
	}
	return nil
}

// CellPatterns select cells by name (CellID.String(), e.g.
// "veth-routed/service(ebpf+10000)/tcp_crr") with path.Match patterns: "*"
// stops at "/". No pattern selects every cell.
type CellPatterns []string

// Match says whether the cell id is selected.
func (p CellPatterns) Match(id CellID) bool {
	if len(p) == 0 {
		return true
	}
	for _, name := range id.Names() {
		for _, pat := range p {
			if ok, _ := path.Match(pat, name); ok {
				return true
			}
		}
	}
	return false
}

// Check refuses a malformed pattern.
func (p CellPatterns) Check() error {
	for _, pat := range p {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("cells pattern %q is malformed (%v): use names like veth-routed/service(ebpf+10000)/tcp_crr, * within one part", pat, err)
		}
	}
	return nil
}
