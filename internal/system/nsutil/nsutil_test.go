package nsutil

import (
	"errors"
	"net"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Create marks and configures the new namespace from inside it, Do and
// Scratch run their function inside theirs, and each leaves the calling
// thread in the namespace it was in, also when entering or the function
// fails.
func TestInsideAndBack(t *testing.T) {
	if !inOwnMountNS(t) {
		return
	}
	here := func() string {
		ns, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		return ns.UniqueId()
	}
	start := here()
	const name = "vnl-nsutest-in"
	if err := Create(name, "mark-1", "net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	defer Delete(name)
	if got := here(); got != start {
		t.Fatalf("Create left the thread in %s, not %s", got, start)
	}
	if got := Mark(name); got != "mark-1" {
		t.Errorf("Mark = %q, want mark-1", got)
	}
	if got, err := ReadSysctl(name, "net.ipv4.ip_forward"); err != nil || got != "1" {
		t.Errorf("ip_forward in %s = %q %v, want 1", name, got, err)
	}
	var inside string
	err := Do(name, func() error {
		inside = here()
		lo, err := netlink.LinkByName("lo")
		if err == nil && lo.Attrs().Flags&net.FlagUp == 0 {
			t.Errorf("lo of %s is down", name)
		}
		return errors.New("fn failed")
	})
	if err == nil || err.Error() != "fn failed" {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	if inside == start || here() != start {
		t.Errorf("Do ran in %s (start %s), left the thread in %s", inside, start, here())
	}
	if err := Do("vnl-nsutest-none", func() error { t.Error("fn ran without its namespace"); return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Do in a missing namespace: %v, want not exist", err)
	}
	var scratch string
	if err := Scratch(func() error { scratch = here(); return nil }); err != nil {
		t.Fatal(err)
	}
	if scratch == start || scratch == inside || here() != start {
		t.Errorf("Scratch ran in %s (start %s, %s's %s), left the thread in %s", scratch, start, name, inside, here())
	}
}
