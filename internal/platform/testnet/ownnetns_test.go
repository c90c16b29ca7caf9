package testnet

import (
	"net"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(OwnNetns(m)) }

// Run as root, this package's tests are in a namespace of their own: not
// the one go test ran them from, and holding only a loopback, up.
func TestOwnNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace)")
	}
	mine, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if from := os.Getenv(ownNetnsEnv); from == "" || from == mine {
		t.Fatalf("tests in %s, run from %q: want a namespace of their own", mine, from)
	}
	links, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Name != "lo" || links[0].Flags&net.FlagUp == 0 {
		t.Fatalf("links %+v, want only lo, up", links)
	}
}
