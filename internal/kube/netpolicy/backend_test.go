package netpolicy

import (
	"os"
	"os/exec"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// The nftables backend in a namespace of the test's: a world's rules, then
// each change's (a delta each), hold the table the rules make; a table
// taken away behind its back is written whole again at the next change.
func TestNFTablesBackend(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	ns := "vnl-netpolicy-nft"
	if nsutil.Exists(ns) { // a run killed before its cleanup
		_ = nsutil.Delete(ns)
	}
	if err := nsutil.Create(ns, "vnetlab netpolicy backend test"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(ns) })
	b := NewNFTables(ns)
	g := netpoltest.New(3)
	c := netpol.NewCompilerOf(g.World, nil)
	holds := func(step int, r *netpol.Rules) {
		t.Helper()
		h, err := polnft.Read(ns)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if want := polnft.Objects(polnft.Script(r)); h.Objects != want {
			t.Fatalf("step %d: the table holds %d objects, the rules make %d", step, h.Objects, want)
		}
	}
	var prev netpol.Rules
	for step := 0; step < 20; step++ {
		if step > 0 {
			g.Change().ApplyTo(c)
		}
		r := c.Rules()
		if step == 10 {
			if err := polnft.Remove(ns); err != nil {
				t.Fatal(err)
			}
			for polnft.Delta(netpol.Diff(&prev, &r)) == "" { // a change the table shows
				g.Change().ApplyTo(c)
				r = c.Rules()
			}
		}
		if err := b.Apply(&r, c.Changes(), nil); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		holds(step, &r)
		prev = r
	}
}
