package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// --policy and --extra-policies: the combinations that cannot run are
// refused in one line naming the flag, before anything is made; so is
// --policy on a cluster whose enforcer is none.
func TestConvergePolicyFlags(t *testing.T) {
	ok := DefaultConvergeSpec()
	ok.Local = "k"
	with := func(f func(*ConvergeSpec)) ConvergeSpec { s := ok; f(&s); return s }
	for _, c := range []struct {
		spec ConvergeSpec
		want string
	}{
		{with(func(s *ConvergeSpec) { s.Policy = true }), ""},
		{with(func(s *ConvergeSpec) { s.Policy, s.ExtraPolicies = true, 1000 }), ""},
		{with(func(s *ConvergeSpec) { s.ExtraPolicies = 10 }), "--extra-policies is the background of --policy's changes: give --policy too"},
		{with(func(s *ConvergeSpec) { s.Policy, s.ExtraPolicies = true, -1 }), "--extra-policies -1: use 0 to 131072"},
		{with(func(s *ConvergeSpec) { s.Policy, s.ExtraPolicies = true, MaxExtraPolicies+1 }), "--extra-policies 131073"},
		{with(func(s *ConvergeSpec) { s.Policy, s.CRR = true, time.Second }), "--crr measures a Service made after Service changes: not with --policy"},
		{with(func(s *ConvergeSpec) { s.Policy, s.Changes = true, 4 }), ""},
		{with(func(s *ConvergeSpec) { s.Policy, s.Changes = true, 3 }), "--changes 3: use 4 to 100000 (a cycle writes one change of each kind: allow-added, label-removed, label-added, allow-deleted)"},
		{with(func(s *ConvergeSpec) { s.Changes = 4 }), "--changes 4: use 5 to 100000 (a cycle writes one change of each kind: service-created,"},
	} {
		err := c.spec.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("policy %v, extra %d, crr %s: %v; want %q", c.spec.Policy, c.spec.ExtraPolicies, c.spec.CRR, err, c.want)
		}
	}
	pol := with(func(s *ConvergeSpec) { s.Policy = true })
	for _, e := range clusternet.Enforcers {
		err := pol.checkEnforcer("k", e.Name)
		if e.Enforces != (err == nil) {
			t.Errorf("--policy on a cluster enforcing with %s: %v", e.Name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "cluster k enforces no NetworkPolicy (--network-policy none)")) {
			t.Errorf("refusal %q: want one line naming the enforcer", err)
		}
	}
	if err := ok.checkEnforcer("k", clusternet.PolicyNone); err != nil {
		t.Errorf("Service changes on a cluster without an enforcer: %v", err)
	}
}
