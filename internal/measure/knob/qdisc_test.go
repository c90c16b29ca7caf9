package knob_test

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// qdisc replaces the root qdisc of each pod's node-side device (a veth's
// node end) with each qdisc it takes, and reads it back there only; one
// this kernel lacks (fq, fq_codel here: no modules) is not applied,
// saying so; a podless mode has no such device, and says so.
func TestQdiscInLab(t *testing.T) {
	p := labPath(t, "kn-qdisc", vethRouted)
	for _, q := range append(knob.Qdiscs, "noqueue") {
		asked := knob.Values("").With(knob.Qdisc, q)
		if proof, err := knob.Apply(p, asked); err != nil || strings.Contains(proof.NotApplied, "this kernel does not have it") {
			if q == "noqueue" || q == "pfifo_fast" || err != nil {
				t.Errorf("qdisc %s: %v %+v", q, err, proof)
			}
			t.Logf("qdisc %s: not applied: %s", q, proof.NotApplied)
			continue
		}
		proofs := apply(t, p, asked, knob.Qdisc, "")
		if len(proofs) != len(p.Pods) {
			t.Errorf("qdisc %s: %d devices proven, want one per pod (%d): %+v", q, len(proofs), len(p.Pods), proofs)
		}
		for _, f := range proofs {
			if !strings.Contains(f.Where, "in "+p.Pods[0].NodeNS) || !strings.Contains(f.Where, "(veth)") {
				t.Errorf("qdisc %s set on %s, not a pod's node-side veth", q, f.Where)
			}
		}
		allGot(t, proofs, q)
	}
	k, err := knob.Get(string(knob.Qdisc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Canonical("cake"); err == nil || !strings.Contains(err.Error(), "noqueue, fq, fq_codel, pfifo_fast") {
		t.Errorf("qdisc cake: %v, want the qdiscs named", err)
	}
	host := labPath(t, "kn-qdisch", hostMode)
	apply(t, host, "qdisc=fq", knob.Qdisc, "no node-side device")
}
