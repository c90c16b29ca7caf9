package proxy

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
)

// fakePlane records the calls the syncer makes.
type fakePlane struct {
	m     map[Key][]tcbpf.Backend
	aff   map[Key]uint32 // session affinity of the entries that have one
	calls []string
}

func (f *fakePlane) setAffinity(k Key, sec uint32) {
	if f.aff == nil {
		f.aff = map[Key]uint32{}
	}
	if sec == 0 {
		delete(f.aff, k)
		return
	}
	f.aff[k] = sec
}

func (f *fakePlane) AddService(s tcbpf.Service) error {
	k := Key{VIP: s.VIP, Port: s.Port, Proto: s.Proto}
	if _, ok := f.m[k]; ok {
		return tcbpf.ErrExists
	}
	f.m[k] = s.Backends
	f.setAffinity(k, s.Affinity)
	f.calls = append(f.calls, "add "+k.String())
	return nil
}

func (f *fakePlane) UpdateService(s tcbpf.Service) error {
	k := Key{VIP: s.VIP, Port: s.Port, Proto: s.Proto}
	if _, ok := f.m[k]; !ok {
		return tcbpf.ErrNotFound
	}
	f.m[k] = s.Backends
	f.setAffinity(k, s.Affinity)
	f.calls = append(f.calls, "update "+k.String())
	return nil
}

func (f *fakePlane) DelService(vip netip.Addr, port uint16, proto tcbpf.Proto) error {
	k := Key{VIP: vip, Port: port, Proto: proto}
	if _, ok := f.m[k]; !ok {
		return tcbpf.ErrNotFound
	}
	delete(f.m, k)
	f.setAffinity(k, 0)
	f.calls = append(f.calls, "del "+k.String())
	return nil
}

func (f *fakePlane) ListServices() ([]tcbpf.Service, error) {
	var out []tcbpf.Service
	for k, v := range f.m {
		out = append(out, tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, Backends: v, Affinity: f.aff[k]})
	}
	return out, nil
}

func entries(kv ...any) Entries {
	e := Entries{}
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
		want  Entries
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
	f := &fakePlane{m: map[Key][]tcbpf.Backend{}}
	s, err := NewSyncer(f)
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
	want := map[Key][]tcbpf.Backend{key("10.96.0.1:80/tcp"): nil, key("10.96.0.2:53/udp"): bes("10.244.1.7:53")}
	if !reflect.DeepEqual(f.m, want) {
		t.Errorf("maps %v, want %v", f.m, want)
	}
}

// A restarted proxy finds the maps as the last one left them: it changes
// only what differs, and Prune removes what no Service claims any more.
func TestSyncAfterRestart(t *testing.T) {
	f := &fakePlane{m: map[Key][]tcbpf.Backend{
		key("10.96.0.1:80/tcp"): bes("10.244.1.5:8080"),
		key("10.96.0.2:80/tcp"): bes("10.244.1.6:8080"),
		key("10.96.0.3:80/tcp"): bes("10.244.1.7:8080"),
	}}
	s, err := NewSyncer(f)
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
	f := &fakePlane{m: map[Key][]tcbpf.Backend{}}
	s, _ := NewSyncer(f)
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
	f := &fakePlane{m: map[Key][]tcbpf.Backend{}}
	s, _ := NewSyncer(f)
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
		if _, err := s.SyncWith("ns/a", two, st.affinity); err != nil {
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
	restarted, err := NewSyncer(f)
	if err != nil {
		t.Fatal(err)
	}
	f.calls = nil
	if _, err := restarted.SyncWith("ns/a", two, 30); err != nil || len(f.calls) != 0 {
		t.Errorf("restarted proxy: calls %v, %v; want none (affinity 30 already there)", f.calls, err)
	}
	if _, err := restarted.Sync("ns/a", nil); err != nil || len(f.aff) != 0 {
		t.Errorf("Service gone: affinity left %v, %v", f.aff, err)
	}
}
