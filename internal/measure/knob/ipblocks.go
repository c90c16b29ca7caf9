package knob

// IPBlocks is the address blocks of one more generated NetworkPolicy the
// measured flow is checked against (a cluster knob: Settings.Policy).
const IPBlocks Name = "ipblocks"

// MaxIPBlocks bounds IPBlocks (labpolicy.CheckScale refuses less).
const MaxIPBlocks = 100000

func init() {
	register(Knob{Name: IPBlocks, Scope: Cluster, order: 100, Whole: true, Example: "16", canonical: intIn(IPBlocks, 0, MaxIPBlocks, ""),
		Help:     "address blocks (ipBlock CIDRs) of one more policy selecting the measured server pod, none matching the flow (docs/policies-cost.md)",
		intField: func(s *Settings) *int { return &s.Policy.IPBlocks }})
}
