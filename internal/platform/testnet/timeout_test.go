package testnet

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// A -timeout below the least is refused, naming the fix; none (0) and
// enough pass. The flag is set back after (the running alarm keeps the
// value it started with).
func TestCheckTimeout(t *testing.T) {
	f := flag.Lookup("test.timeout")
	old := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(old) })
	for _, c := range []struct {
		timeout string
		want    string
	}{
		{"5m", "-timeout 5m0s is too short for this package (it builds things): go test's timeout would kill it before its teardown, leaving up what it brought up; run go test -timeout 20m0s or more"},
		{"0", ""},
		{"20m", ""},
	} {
		if err := f.Value.Set(c.timeout); err != nil {
			t.Fatal(err)
		}
		err := CheckTimeout(20*time.Minute, "it builds things")
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("-timeout %s: %v, want %q", c.timeout, err, c.want)
		}
	}
}
