package knob

// Policies is the lab's generated NetworkPolicies the measured flow is
// checked against (a cluster knob: Settings.Policy).
const Policies Name = "policies"

// MaxPolicies bounds Policies; each provider refuses less when it would
// take minutes to load them (labpolicy.CheckScale).
const MaxPolicies = 100000

func init() {
	register(policyKnob(Policies, 90, MaxPolicies, "100",
		"NetworkPolicies selecting the measured server pod that the flow is checked against without matching (each allows one other address), plus the one allowing it, loaded by each --policy-providers provider (docs/policies-cost.md)",
		func(p *PolicySet) *int { return &p.Policies }))
}
