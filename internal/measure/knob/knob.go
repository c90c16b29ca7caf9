// Package knob is the vocabulary of the knobs users turn: a
// message size, a number of streams, the links' MTU, their GSO and GRO
// maximum sizes (BIG TCP), their offloads, and background load. Each knob
// is named once here, with its range; a sweep (sweep.go) crosses several
// values of knobs into points, each point a cell coordinate
// (results.CellID.Point). Setting a lab's links and reading them back is
// links.go. Where each knob's value lives is its field of Settings
// (settings.go), which runner.Spec embeds.
package knob

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Name is a knob's name, as flags, scenario keys and points spell it.
type Name string

// The knobs.
const (
	Size    Name = "size"    // rr/crr request and response bytes; stream write size (iperf3 -l)
	Streams Name = "streams" // parallel streams (iperf3 -P); concurrent flows for rr/crr
	MTU     Name = "mtu"     // every link on the path
	GSO     Name = "gso"     // gso_max_size (and gso_ipv4_max_size) of every link on the path
	GRO     Name = "gro"     // gro_max_size (and gro_ipv4_max_size) of every link on the path
	Offload Name = "offload" // ethtool features of every link on the path
	Load    Name = "load"    // streams saturating the path while an rr/crr test runs
	Rate    Name = "rate"    // offered rate: rr/crr requests/s (open loop); UDP streams bits/s
	// The lab's NetworkPolicies: generated policies, and
	// address blocks of one policy, the measured flow is checked against.
	Policies Name = "policies"
	IPBlocks Name = "ipblocks"
)

// Limits of the values (the kernel's where it has one).
const (
	MaxSize    = 1 << 20 // rr's largest message; UDP tests are held to 65507 by their engines
	MaxStreams = 128
	MinMTU     = 68    // IPv4's minimum (RFC 791)
	MaxMTU     = 65535 // ETH_MAX_MTU: no Linux link takes more
	// MaxGSO is GSO_MAX_SIZE since Linux 6.3 (8 x 65535): BIG TCP's ceiling.
	MaxGSO = 524280
	// LegacyGSO is the largest GSO/GRO packet without BIG TCP (GSO_LEGACY_MAX_SIZE).
	LegacyGSO = 65536
	MaxLoad   = 64
	// MaxPolicies and MaxIPBlocks bound the policy knobs; each provider
	// refuses less when it would take minutes to load them
	// (labpolicy.CheckScale).
	MaxPolicies = 100000
	MaxIPBlocks = 100000
)

// Knob is one knob: its name, what it sets, its values' check, and
// whether it is a setting of the lab's links (then each value needs a lab
// of its own) or of the engine (cells of one lab differ in it); where its
// value lives in Settings (the one place a knob meets its field: Set,
// Value, a flag bound to IntField or StringField), its flag's help and its
// plain value's check (Check).
type Knob struct {
	Name Name
	// Help is its plain flag's help (--NAME).
	Help string
	// Links: set on every link of the lab's path (links.go), so a lab
	// per value; otherwise the engine takes it per sample.
	Links bool
	// Policy: the lab's NetworkPolicies (Settings.Policy), loaded by a
	// policy provider, so a lab per value and provider (the run's policy
	// providers are a cell coordinate of their own).
	Policy bool
	// RequestResponseOnly: the knob changes only rr/crr tests (load);
	// other tests are measured at its base value only.
	RequestResponseOnly bool
	// canonical checks a value and spells it one way ("" = invalid).
	canonical func(string) (string, error)
	// intField or stringField (one of them) is where its value lives.
	intField    func(*Settings) *int
	stringField func(*Settings) *string
	// check refuses a plain value in its own words (nil: canonical's,
	// CheckValue).
	check func(value string) error
}

// All are the knobs, in the order help and errors list them.
var All = []Knob{
	{Name: Size, canonical: intIn(Size, 1, MaxSize, ""),
		Help:     "bytes per request and response (rr, crr; sockperf needs 14 or more), per write (iperf3 -l), per datagram (udp_pps: default 64); 0: each engine's default",
		intField: func(s *Settings) *int { return &s.Size },
		check:    countMax(Size, MaxSize, " bytes", " (0: each engine's default)")},
	{Name: Streams, canonical: intIn(Streams, 1, MaxStreams, ""),
		Help:     "parallel streams (iperf3 -P), or concurrent flows of rr/crr tests",
		intField: func(s *Settings) *int { return &s.Streams },
		// Streams 0 (a spec's zero value) is one stream, as the engines read it.
		check: countMax(Streams, MaxStreams, "", "")},
	{Name: MTU, Links: true,
		canonical: intIn(MTU, MinMTU, MaxMTU, "the largest MTU Linux allows (ETH_MAX_MTU)"),
		Help:      "MTU of every link on the path (tunnels: the inner links get it minus the overhead); 0: the mode's own",
		intField:  func(s *Settings) *int { return &s.Links.MTU }},
	{Name: GSO, Links: true,
		canonical: intIn(GSO, 1, MaxGSO, "GSO_MAX_SIZE"),
		Help:      "gso_max_size (and gso_ipv4_max_size) of every link on the path; above 65536 is BIG TCP; 0: the kernel's",
		intField:  func(s *Settings) *int { return &s.Links.GSO }},
	{Name: GRO, Links: true,
		canonical: intIn(GRO, 1, MaxGSO, "GSO_MAX_SIZE"),
		Help:      "gro_max_size (and gro_ipv4_max_size) of every link on the path; 0: the kernel's",
		intField:  func(s *Settings) *int { return &s.Links.GRO }},
	{Name: Offload, Links: true,
		canonical:   canonicalOffload,
		Help:        "ethtool features of every link on the path, e.g. gro:off+tso:off (features: " + FeatureList() + ")",
		stringField: func(s *Settings) *string { return &s.Links.Offload }},
	{Name: Load, RequestResponseOnly: true,
		canonical: intIn(Load, 0, MaxLoad, ""),
		Help:      "streams saturating the path while rr/crr tests run (latency under load; 0: idle)",
		intField:  func(s *Settings) *int { return &s.Load }},
	{Name: Rate, canonical: canonicalRate,
		Help:        "offered rate: rr/crr requests (connections) per second in all, open-loop, latency from each intended send time (20000 or 20k, up to 50000, or a share of each path's closed-loop maximum, measured first: 50%; docs/engines.md); udp_stream/udp_pps bits/s (iperf3 -b: 500M); max: closed loop, unlimited UDP",
		stringField: func(s *Settings) *string { return &s.Rate },
		check:       checkRate},
	{Name: Policies, Policy: true, canonical: intIn(Policies, 0, MaxPolicies, ""),
		Help:     "NetworkPolicies selecting the measured server pod that the flow is checked against without matching (each allows one other address), plus the one allowing it, loaded by each --policy-providers provider (docs/policies-cost.md)",
		intField: func(s *Settings) *int { return &s.Policy.Policies }},
	{Name: IPBlocks, Policy: true, canonical: intIn(IPBlocks, 0, MaxIPBlocks, ""),
		Help:     "address blocks (ipBlock CIDRs) of one more policy selecting the measured server pod, none matching the flow (docs/policies-cost.md)",
		intField: func(s *Settings) *int { return &s.Policy.IPBlocks }},
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

// Default is the value of a links' knob that leaves the links as the
// mode built them (in a sweep: the untouched lab, e.g. mtu: [default, 9000]).
const Default = "default"

// Canonical checks v as a value of k and spells it one way.
func (k Knob) Canonical(v string) (string, error) {
	v = strings.TrimSpace(v)
	if k.Links && v == Default {
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

// IsLinks says whether the knob named n is a setting of the lab's links.
func IsLinks(n Name) bool {
	k, err := Get(string(n))
	return err == nil && k.Links
}

// IsPolicy says whether the knob named n is a policy knob (policies,
// ipblocks): a cost axis, where more never helps.
func IsPolicy(n Name) bool {
	k, err := Get(string(n))
	return err == nil && k.Policy
}

// IsPolicyAxis says whether the axis written key (a knob, or knobs joined
// by +: "policies+ipblocks") sweeps policy knobs.
func IsPolicyAxis(key string) bool {
	return slices.ContainsFunc(strings.Split(key, "+"), func(n string) bool { return IsPolicy(Name(n)) })
}

// LabOnly says whether a knob is a lab's own setting (its links, its
// policies), which a cluster's CNI decides instead: kube run refuses it.
func (k Knob) LabOnly() bool { return k.Links || k.Policy }

// LinksNames lists the links knobs, comma-separated (for errors).
func LinksNames() string {
	var s []string
	for _, k := range All {
		if k.Links {
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

// Unlimited is the rate that sets no schedule: rr/crr tests closed-loop,
// UDP streams as fast as they go (the default).
const Unlimited = "max"

var (
	rateRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[kKmMgGtT]?$`)
	shareRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?%$`)
)

// canonicalRate checks a rate's spelling: max, a share of the path's own
// closed-loop maximum (50%: rr/crr tests, RateShare), or a positive number
// with an optional k/M/G/T (each test's engine reads it in its own unit and
// range: engine.OpenRate for rr/crr, iperf3's -b for UDP streams).
func canonicalRate(v string) (string, error) {
	if v == Unlimited {
		return v, nil
	}
	if shareRE.MatchString(v) {
		return canonicalShare(v)
	}
	if !rateRE.MatchString(v) {
		return "", fmt.Errorf("rate %q: use %s, requests per second for rr/crr (20000, 20k) or a share of the path's closed-loop maximum (50%%), or bits per second for UDP streams (500M)", v, Unlimited)
	}
	if n, _ := strconv.ParseFloat(strings.TrimRight(v, "kKmMgGtT"), 64); n <= 0 {
		return "", fmt.Errorf("rate %s: use a positive rate, or %s for none (closed loop, unlimited UDP)", v, Unlimited)
	}
	return v, nil
}

// canonicalShare checks a share of the maximum: above 0% and at most 100%.
// Above 100% is refused: an open loop that offers more than the path
// answers falls further behind every second, so its latency grows with
// the sample's length and says nothing of the path (an absolute rate
// measures past the maximum on purpose).
func canonicalShare(v string) (string, error) {
	n, _ := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	switch {
	case n <= 0:
		return "", fmt.Errorf("rate %s: use a share above 0%% of the path's closed-loop maximum (10%%, 50%%, 95%%)", v)
	case n > 100:
		return "", fmt.Errorf("rate %s is above the path's closed-loop maximum (100%%), where an open loop falls further behind every second and its latency measures the sample's length: use up to 100%%, or an absolute rate (20000)", v)
	}
	return strconv.FormatFloat(n, 'f', -1, 64) + "%", nil
}

// RateShare is the share of the path's closed-loop maximum a rate asks
// for (0.5 for "50%"), and whether it is one.
func RateShare(v string) (float64, bool) {
	if !shareRE.MatchString(v) {
		return 0, false
	}
	n, _ := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	return n / 100, true
}

// checkRate refuses a plain rate ("" is the default, max).
func checkRate(v string) error {
	if v == "" {
		return nil
	}
	if _, err := canonicalRate(v); err != nil {
		return field.Errorf(string(Rate), "{%s}: %v", Rate, err)
	}
	return nil
}
