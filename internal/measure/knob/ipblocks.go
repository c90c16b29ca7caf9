package knob

// IPBlocks is the address blocks of one more generated NetworkPolicy the
// measured flow is checked against (a cluster knob: Settings.Policy).
const IPBlocks Name = "ipblocks"

// MaxIPBlocks bounds IPBlocks (labpolicy.CheckScale refuses less).
const MaxIPBlocks = 100000

func init() {
	register(policyKnob(IPBlocks, 100, MaxIPBlocks, "16",
		"address blocks (ipBlock CIDRs) of one more policy selecting the measured server pod, none matching the flow (docs/policies-cost.md)",
		func(p *PolicySet) *int { return &p.IPBlocks }))
}
