package bench

import "testing"

// A local cluster's nodes run on this machine's CPUs (--cpu-affinity auto
// pins there as in a lab); a kubeconfig's cluster may be anywhere.
func TestMeasureSpecCPUs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s         Spec
		elsewhere bool
	}{
		{"--cluster", Spec{Cluster: Target{Local: "k"}}, false},
		{"kube.clusters", Spec{Configs: []Config{{Name: "a"}}}, false},
		{"--kubeconfig", Spec{Cluster: Target{Kubeconfig: "kc"}}, true},
	} {
		if got := tc.s.measureSpec().CPUsElsewhere; got != tc.elsewhere {
			t.Errorf("%s: CPUsElsewhere %v, want %v", tc.name, got, tc.elsewhere)
		}
	}
}
