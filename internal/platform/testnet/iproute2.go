package testnet

import (
	"os/exec"
	"strings"
	"testing"
)

// IPNetns runs iproute2's `ip netns ARGS` (the tests that play vnetlab
// beside it) and returns its output; an error fails the test.
// nsutil's tests keep their own: this package imports lab, which imports nsutil.
func IPNetns(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
