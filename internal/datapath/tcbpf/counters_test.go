package tcbpf

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// lbStats reads bpf/lb.h's LB_STAT_* enum: name -> index.
func lbStats(t *testing.T) map[string]uint64 {
	t.Helper()
	src, err := os.ReadFile("../../../bpf/lb.h")
	if err != nil {
		t.Fatal(err)
	}
	enum := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^\s*LB_STAT_(\w+) = (\d+),`).FindAllSubmatch(src, -1) {
		n, _ := strconv.ParseUint(string(m[2]), 10, 32)
		enum[string(m[1])] = n
	}
	if len(enum) == 0 {
		t.Fatal("no LB_STAT_* in bpf/lb.h")
	}
	return enum
}

// TestCountersFollowTheEnum: Stats and Stats6 read each counter at its
// LB_STAT_* index (one enum for lb_stats and lb6_stats), and the maps hold
// as many as the Go side reads.
func TestCountersFollowTheEnum(t *testing.T) {
	enum := lbStats(t)
	var s Stats
	for i, c := range s.counters() {
		*c = uint64(i)
	}
	var s6 Stats6
	for i, c := range s6.counters() {
		*c = uint64(i)
	}
	for _, c := range []struct {
		name   string
		v4, v6 *uint64 // nil: not the family's
	}{
		{"DNAT", &s.DNAT, &s6.DNAT}, {"RNAT", &s.RNAT, &s6.RNAT}, {"CT_NEW", &s.NewFlows, &s6.NewFlows},
		{"NO_BACKEND", &s.NoBackend, &s6.NoBackend}, {"ICMP", &s.ICMP, &s6.ICMP}, {"FRAG", &s.Frags, &s6.Frags},
		{"HAIRPIN", &s.Hairpin, nil}, {"ERROR", &s.Errors, &s6.Errors}, {"REJECT", &s.Rejects, &s6.Rejects},
		{"EXTHDR_PASS", nil, &s6.ExtHdrPass}, {"TRUNC_PASS", nil, &s6.TruncPass},
	} {
		want, ok := enum[c.name]
		if !ok {
			t.Errorf("LB_STAT_%s is not in bpf/lb.h", c.name)
			continue
		}
		if c.v4 != nil && *c.v4 != want {
			t.Errorf("Stats reads LB_STAT_%s at %d, the enum says %d", c.name, *c.v4, want)
		}
		if c.v6 != nil && *c.v6 != want {
			t.Errorf("Stats6 reads LB_STAT_%s at %d, the enum says %d", c.name, *c.v6, want)
		}
	}
	spec, err := loadService()
	if err != nil {
		t.Fatal(err)
	}
	if n, want := spec.Maps[serviceMapLbStats].MaxEntries, uint32(len(s.counters())); n != want || uint64(n) != enum["IPV4_MAX"] {
		t.Errorf("lb_stats holds %d counters, Stats reads %d, LB_STAT_IPV4_MAX is %d", n, want, enum["IPV4_MAX"])
	}
	if n, want := spec.Maps[serviceMapLb6Stats].MaxEntries, uint32(len(s6.counters())); n != want || uint64(n) != enum["MAX"] {
		t.Errorf("lb6_stats holds %d counters, Stats6 reads %d, LB_STAT_MAX is %d", n, want, enum["MAX"])
	}
}
