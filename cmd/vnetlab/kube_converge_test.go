package main

import (
	"strings"
	"testing"
)

// The converge verbs' --pause: refused before anything is made, in one
// line naming the flag, whether unreadable or reversed; kube converge
// checks it before it looks for the cluster.
func TestConvergePauseFlag(t *testing.T) {
	bin := vnetlabBin(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kube", "converge", "--cluster", "none-such", "--pause", "2s-1s"}, "--pause 2s-1s: use MIN-MAX with 0 <= MIN <= MAX"},
		{[]string{"kube", "converge", "--cluster", "none-such", "--pause", "soon"}, `--pause "soon": want MIN-MAX`},
	} {
		_, e, code := runVnetlab(t, bin, c.args...)
		if code == 0 || !strings.Contains(e, c.want) || strings.Count(strings.TrimSpace(e), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", c.args, code, e, c.want)
		}
	}
}
