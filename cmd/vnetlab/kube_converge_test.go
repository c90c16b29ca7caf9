package main

import (
	"context"
	"errors"
	"io"
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

// runMeasured, the measuring verbs' run: the table of what measure
// returned, written to output only when given, and measure's error alone
// when it fails.
func TestRunMeasured(t *testing.T) {
	cmd := newKubeReadinessCmd()
	cmd.SetContext(context.Background())
	for _, c := range []struct {
		output  string
		fail    bool
		table   int
		written string
	}{
		{output: "", table: 7},
		{output: "out.json", table: 7, written: "out.json"},
		{output: "out.json", fail: true},
	} {
		var tabled int
		var written string
		err := runMeasured(cmd, c.output, func(ctx context.Context, _ func(string, ...any)) (int, error) {
			if ctx.Err() != nil {
				t.Errorf("%+v: measure's context done at the start", c)
			}
			if c.fail {
				return 0, errors.New("failed")
			}
			return 7, nil
		}, func(_ io.Writer, v int) { tabled = v }, func(path string, v int) error {
			if v != 7 {
				t.Errorf("%+v: wrote %d, want 7", c, v)
			}
			written = path
			return nil
		})
		if (err != nil) != c.fail || tabled != c.table || written != c.written {
			t.Errorf("%+v: err %v, table of %d, written to %q", c, err, tabled, written)
		}
	}
}
