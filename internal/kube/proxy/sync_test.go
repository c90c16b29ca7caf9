package proxy

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// fakePlane records the calls the syncer makes, and checks the one order
// the programs rely on: an entry marked HasExternal always has its
// External entry.
type fakePlane struct {
	m      map[svcsync.Key][]tcbpf.Backend
	aff    map[svcsync.Key]uint32 // session affinity of the entries that have one
	marked map[svcsync.Key]bool   // entries marked HasExternal
	calls  []string
	broken []string // times a mark pointed to no External entry
	// ForgetUDPFlows: what each call was asked to keep.
	forgot []map[netip.AddrPort][]tcbpf.Backend
}

func newFakePlane() *fakePlane { return &fakePlane{m: map[svcsync.Key][]tcbpf.Backend{}} }

func (f *fakePlane) set(k svcsync.Key, s tcbpf.Service) {
	f.m[k] = s.Backends
	if f.aff == nil {
		f.aff, f.marked = map[svcsync.Key]uint32{}, map[svcsync.Key]bool{}
	}
	if s.Affinity == 0 {
		delete(f.aff, k)
	} else {
		f.aff[k] = s.Affinity
	}
	f.marked[k] = s.HasExternal
	if s.HasExternal {
		if _, ok := f.m[svcsync.Key{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: true}]; !ok {
			f.broken = append(f.broken, "marked before its external entry: "+k.String())
		}
	}
}

func (f *fakePlane) AddService(s tcbpf.Service) error {
	k := svcsync.KeyOf(s)
	if _, ok := f.m[k]; ok {
		return tcbpf.ErrExists
	}
	if err := s.Validate(); err != nil { // as the real plane refuses it
		return err
	}
	f.set(k, s)
	f.calls = append(f.calls, "add "+k.String())
	return nil
}

func (f *fakePlane) UpdateService(s tcbpf.Service) error {
	k := svcsync.KeyOf(s)
	if _, ok := f.m[k]; !ok {
		return tcbpf.ErrNotFound
	}
	if err := s.Validate(); err != nil {
		return err
	}
	f.set(k, s)
	f.calls = append(f.calls, "update "+k.String())
	return nil
}

func (f *fakePlane) DelEntry(s tcbpf.Service) error {
	k := svcsync.KeyOf(s)
	if _, ok := f.m[k]; !ok {
		return tcbpf.ErrNotFound
	}
	if k.External && f.marked[svcsync.Key{VIP: k.VIP, Port: k.Port, Proto: k.Proto}] {
		if _, ok := f.m[svcsync.Key{VIP: k.VIP, Port: k.Port, Proto: k.Proto}]; ok {
			f.broken = append(f.broken, "external entry deleted under its mark: "+k.String())
		}
	}
	delete(f.m, k)
	delete(f.aff, k)
	delete(f.marked, k)
	f.calls = append(f.calls, "del "+k.String())
	return nil
}

func (f *fakePlane) ListServices() ([]tcbpf.Service, error) {
	var out []tcbpf.Service
	for k, v := range f.m {
		out = append(out, tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: k.External, Backends: v, Affinity: f.aff[k], HasExternal: f.marked[k]})
	}
	return out, nil
}

func (f *fakePlane) ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend, _ tcbpf.FlowGuard) (int, error) {
	f.forgot = append(f.forgot, maps.Clone(keep))
	return len(keep), nil
}

func entries(kv ...any) svcsync.Entries {
	e := svcsync.Entries{}
	for i := 0; i < len(kv); i += 2 {
		bs, _ := kv[i+1].([]string)
		e[key(kv[i].(string))] = bes(bs...)
	}
	return e
}

// Each step syncs one Service and must make exactly the listed map calls:
// nothing for what did not change, whatever else the maps hold.
func TestSyncIsIncremental(t *testing.T) {
	steps := []struct {
		svc   string
		want  svcsync.Entries
		calls []string
	}{
		{"ns/a", entries("10.96.0.1:80/tcp", []string{"10.244.1.5:8080"}), []string{"add 10.96.0.1:80/tcp"}},
		{"ns/b", entries("10.96.0.2:53/tcp", []string{"10.244.1.6:53"}, "10.96.0.2:53/udp", []string{"10.244.1.6:53"}),
			[]string{"add 10.96.0.2:53/tcp", "add 10.96.0.2:53/udp"}},
		{"ns/a", entries("10.96.0.1:80/tcp", []string{"10.244.1.5:8080"}), nil}, // unchanged
		{"ns/a", entries("10.96.0.1:80/tcp", []string{"10.244.1.5:8080", "10.244.2.5:8080"}), []string{"update 10.96.0.1:80/tcp"}},
		{"ns/b", entries("10.96.0.2:53/udp", []string{"10.244.1.6:53"}), []string{"del 10.96.0.2:53/tcp"}},
		{"ns/a", entries("10.96.0.1:80/tcp", nil), []string{"update 10.96.0.1:80/tcp"}},                    // endpoints gone: entry stays, no backends
		{"ns/b", nil, []string{"del 10.96.0.2:53/udp"}},                                                    // Service deleted
		{"ns/c", entries("10.96.0.2:53/udp", []string{"10.244.1.7:53"}), []string{"add 10.96.0.2:53/udp"}}, // address reused
	}
	f := newFakePlane()
	s, err := svcsync.NewSyncer(f)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		f.calls = nil
		ch, err := s.Sync(st.svc, st.want)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if fmt.Sprint(sorted(f.calls)) != fmt.Sprint(sorted(st.calls)) {
			t.Errorf("step %d (%s): calls %v, want %v", i, st.svc, f.calls, st.calls)
		}
		if ch.Total() != len(st.calls) {
			t.Errorf("step %d: changes %+v, want %d", i, ch, len(st.calls))
		}
	}
	want := map[svcsync.Key][]tcbpf.Backend{key("10.96.0.1:80/tcp"): nil, key("10.96.0.2:53/udp"): bes("10.244.1.7:53")}
	if !reflect.DeepEqual(f.m, want) {
		t.Errorf("maps %v, want %v", f.m, want)
	}
}

// A restarted proxy finds the maps as the last one left them: it changes
// only what differs, and Prune removes what no Service claims any more.
func TestSyncAfterRestart(t *testing.T) {
	f := &fakePlane{m: map[svcsync.Key][]tcbpf.Backend{
		key("10.96.0.1:80/tcp"): bes("10.244.1.5:8080"),
		key("10.96.0.2:80/tcp"): bes("10.244.1.6:8080"),
		key("10.96.0.3:80/tcp"): bes("10.244.1.7:8080"),
	}}
	s, err := svcsync.NewSyncer(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync("ns/a", entries("10.96.0.1:80/tcp", []string{"10.244.1.5:8080"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync("ns/b", entries("10.96.0.2:80/tcp", []string{"10.244.2.6:8080"})); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Prune()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"update 10.96.0.2:80/tcp", "del 10.96.0.3:80/tcp"}; fmt.Sprint(f.calls) != fmt.Sprint(want) || ch.Deleted != 1 {
		t.Errorf("calls %v (%+v), want %v", f.calls, ch, want)
	}
}

// Two Services never share an entry: the second is refused with an error
// (and retried by the proxy), the first keeps it.
func TestSyncRefusesATakenEntry(t *testing.T) {
	f := newFakePlane()
	s, _ := svcsync.NewSyncer(f)
	if _, err := s.Sync("ns/a", entries("10.96.0.1:80/tcp", []string{"10.244.1.5:80"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync("ns/b", entries("10.96.0.1:80/tcp", []string{"10.244.1.9:80"})); err == nil {
		t.Fatal("a second Service took 10.96.0.1:80/tcp")
	}
	if got := f.m[key("10.96.0.1:80/tcp")]; !reflect.DeepEqual(got, bes("10.244.1.5:80")) {
		t.Errorf("entry %v, want a's backend", got)
	}
	if _, err := s.Sync("ns/a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync("ns/b", entries("10.96.0.1:80/tcp", []string{"10.244.1.9:80"})); err != nil {
		t.Fatalf("once a is gone, b: %v", err)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// A Service's session affinity travels with its entries: set, changed and
// removed in place (same entries, an update each), nothing when unchanged,
// and a restarted proxy finds it in the maps and leaves it.
func TestSyncAffinity(t *testing.T) {
	f := newFakePlane()
	s, _ := svcsync.NewSyncer(f)
	two := entries("10.96.0.1:80/tcp", []string{"10.244.1.5:80"}, "10.96.0.1:53/udp", []string{"10.244.1.5:53"})
	steps := []struct {
		affinity uint32
		calls    []string
	}{
		{10800, []string{"add 10.96.0.1:80/tcp", "add 10.96.0.1:53/udp"}},
		{10800, nil},
		{2, []string{"update 10.96.0.1:80/tcp", "update 10.96.0.1:53/udp"}},
		{0, []string{"update 10.96.0.1:80/tcp", "update 10.96.0.1:53/udp"}},
		{0, nil},
		{30, []string{"update 10.96.0.1:80/tcp", "update 10.96.0.1:53/udp"}},
	}
	for i, st := range steps {
		f.calls = nil
		if _, err := s.SyncPorts("ns/a", two, st.affinity, nil); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(sorted(f.calls)) != fmt.Sprint(sorted(st.calls)) {
			t.Errorf("step %d (affinity %d): calls %v, want %v", i, st.affinity, f.calls, st.calls)
		}
		for k := range two {
			if f.aff[k] != st.affinity {
				t.Errorf("step %d: %s has affinity %d, want %d", i, k, f.aff[k], st.affinity)
			}
		}
	}
	restarted, err := svcsync.NewSyncer(f)
	if err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	if _, err := restarted.SyncPorts("ns/a", two, 30, nil); err != nil || len(f.calls) != 0 {
		t.Errorf("restarted proxy: calls %v, %v; want none (affinity 30 already there)", f.calls, err)
	}
	if _, err := restarted.Sync("ns/a", nil); err != nil || len(f.aff) != 0 {
		t.Errorf("Service gone: affinity left %v, %v", f.aff, err)
	}
}

// batchPlane takes many new entries in one call (svcsync.BatchPlane, as
// tcbpf.Plane does) and records each call's entries.
type batchPlane struct {
	*fakePlane
	batches [][]string
}

func (b *batchPlane) AddServices(ss []tcbpf.Service) error {
	var names []string
	for _, s := range ss {
		if err := b.AddService(s); err != nil {
			return err
		}
		names = append(names, svcsync.KeyOf(s).String())
	}
	b.batches = append(b.batches, names)
	return nil
}

// With a plane that adds in batches, the new External entries still go in
// before the entries marked to point to them: a batch of External entries,
// then the marked ones (new in a batch, existing updated in place).
func TestSyncBatchesExternalFirst(t *testing.T) {
	b := &batchPlane{fakePlane: newFakePlane()}
	s, err := svcsync.NewSyncer(b)
	if err != nil {
		t.Fatal(err)
	}
	cluster := entries("10.250.0.2:30080/tcp", []string{"10.244.2.5:8080"}, "10.250.0.2:30053/udp", []string{"10.244.2.5:53"})
	if _, err := s.Sync("ns/s", cluster); err != nil {
		t.Fatal(err)
	}
	local := maps.Clone(cluster)
	maps.Copy(local, entries("10.250.0.2:30080/tcp (external)", nil, "10.250.0.2:30053/udp (external)", nil, "10.96.0.1:80/tcp", []string{"10.244.2.5:8080"}, "10.96.0.1:53/udp", []string{"10.244.2.5:53"}))
	b.calls, b.batches = nil, nil
	if _, err := s.Sync("ns/s", local); err != nil {
		t.Fatal(err)
	}
	if len(b.broken) > 0 {
		t.Errorf("a mark before its External entry: %v (calls %v)", b.broken, b.calls)
	}
	want := [][]string{
		{"10.250.0.2:30053/udp (external)", "10.250.0.2:30080/tcp (external)"},
		{"10.96.0.1:53/udp", "10.96.0.1:80/tcp"},
	}
	if !reflect.DeepEqual(b.batches, want) {
		t.Errorf("batches %v, want %v", b.batches, want)
	}
	if !b.marked[key("10.250.0.2:30080/tcp")] || !b.marked[key("10.250.0.2:30053/udp")] || b.marked[key("10.96.0.1:80/tcp")] {
		t.Errorf("marks %v: want the node ports only", b.marked)
	}
}
