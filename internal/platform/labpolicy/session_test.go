package labpolicy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// TestSaveKeepsThePolicies: a session's save, which keeps each policy's
// JSON between saves, writes a file that reads back as the config, also
// after policies are replaced, added and deleted (a stale kept encoding
// would show as the old policy).
func TestSaveKeepsThePolicies(t *testing.T) {
	was := lab.StateRoot
	lab.StateRoot = t.TempDir()
	t.Cleanup(func() { lab.StateRoot = was })
	if err := os.MkdirAll(filepath.Join(lab.StateRoot, "labs", "s"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, allow := netpoltest.BenchWorld(50)
	s := &Session{st: &lab.State{Name: "s"}, c: &Config{Provider: EBPF, Installed: true, Policies: slices.Clone(w.Policies), LoadSeconds: 0.25}}
	check := func(what string) {
		t.Helper()
		got, err := Load("s")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(s.c)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: the file reads back as\n%.400s\nwant\n%.400s", what, a, b)
		}
	}
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	check("the first save")
	changed := s.c.Policies[7]
	changed.Spec.Ingress = nil
	s.c.Merge(netpol.Doc{Policies: []networkingv1.NetworkPolicy{changed, *allow}})
	delete(s.enc, netpol.PolicyKey(&changed))
	delete(s.enc, netpol.PolicyKey(allow))
	s.c.Policies = slices.Delete(s.c.Policies, 3, 4)
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	check("a policy replaced, one added and one deleted")
	s.c.Policies = nil
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
	check("no policies")
}
