package testnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/vishvananda/netlink"
)

// ownNetnsEnv marks the test binary re-run inside its own namespace; its
// value names the namespace it was run from (net:[inode]).
const ownNetnsEnv = "VNETLAB_TEST_OWN_NETNS"

// OwnNetns runs a package's tests (call it as TestMain's whole body:
// os.Exit(testnet.OwnNetns(m))) in a network namespace of their own, with
// only loopback, up: the test binary runs itself again under
// `unshare --net`. A port a test lets go stays free until it binds it
// again, as no other process shares that loopback, and nothing the tests
// send leaves the namespace. Without root the tests run where they are.
func OwnNetns(m *testing.M) int {
	if os.Getenv(ownNetnsEnv) != "" {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "loopback up in the tests' own namespace: %v\n", err)
			return 1
		}
		return m.Run()
	}
	if os.Geteuid() != 0 {
		return m.Run()
	}
	from, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		fmt.Fprintf(os.Stderr, "the tests' namespace: %v\n", err)
		return 1
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--", os.Args[0]}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), ownNetnsEnv+"="+from)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "run the tests in their own namespace (unshare --net): %v\n", err)
		return 1
	}
}
