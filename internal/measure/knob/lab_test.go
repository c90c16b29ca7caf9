package knob_test

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The modes the lab knobs' tests build (the measuring layer's tests name
// them, not import the data paths above it).
const (
	vethRouted = "veth-routed"
	hostMode   = "host"
)

// The lab knobs' tests set them on a lab of their own (root: namespaces;
// hold the lab lock, /run/vnetlab-dev.lock, as every lab test does).

// labPath brings up a two-pod lab of mode named name for the test and
// returns its path as the knobs see it.
func labPath(t *testing.T, name, mode string) knob.Path {
	t.Helper()
	l, _ := testnet.UpLab(t, lab.Spec{Name: name, Mode: mode, PodCIDR: lab.DefaultPodCIDR}, 2)
	p, err := l.State.KnobPath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// apply sets asked on p and returns the proofs of knob k; the proof's
// NotApplied must be notApplied (a part of it; "": none).
func apply(t *testing.T, p knob.Path, asked knob.Values, k knob.Name, notApplied string) []results.KnobProof {
	t.Helper()
	proof, err := knob.Apply(p, asked)
	if err != nil {
		t.Fatal(err)
	}
	if notApplied == "" && proof.NotApplied != "" || !strings.Contains(proof.NotApplied, notApplied) {
		t.Errorf("%s: not applied %q, want %q", asked, proof.NotApplied, notApplied)
	}
	var out []results.KnobProof
	for _, f := range proof.Proofs {
		if f.Knob == string(k) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no proof of %s in %+v", asked, k, proof.Proofs)
	}
	return out
}

// allGot checks every proof found want, as asked, in force.
func allGot(t *testing.T, proofs []results.KnobProof, want string) {
	t.Helper()
	for _, f := range proofs {
		if f.Got != want || f.NotApplied != "" {
			t.Errorf("%s: %s is %q (not applied %q), want %q", f.Where, f.Knob, f.Got, f.NotApplied, want)
		}
	}
}
