package runner

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

func TestCheckSummary(t *testing.T) {
	spec := Spec{Modes: []ModeVariant{{Label: "host"}, {Label: "bridge"}}}
	spec.Summary.Baseline = "bridge"
	if err := checkSummary(spec); err != nil {
		t.Error(err)
	}
	spec.Summary.Baseline = "macvlan"
	if err := checkSummary(spec); err == nil {
		t.Error("a baseline outside the modes must be refused")
	}
	spec.Summary = analysis.Options{CIMethod: "magic"}
	if err := checkSummary(spec); err == nil {
		t.Error("an unknown CI method must be refused")
	}
}
