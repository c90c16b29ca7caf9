package cgroup

import (
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	got, err := parseCPUStat([]byte("usage_usec 3500000\nuser_usec 1250000\nsystem_usec 2250000\nnice_usec 0\nnr_periods 0\n"))
	if err != nil || got.User != 1250*time.Millisecond || got.System != 2250*time.Millisecond {
		t.Fatalf("%+v, %v; want user 1.25 s, system 2.25 s", got, err)
	}
	for _, bad := range []string{"usage_usec 1\n", "user_usec x\nsystem_usec 1\n"} {
		if _, err := parseCPUStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Every cgroup v2 directory has cpu.stat, with or without the cpu
// controller: the root's is readable on any machine with cgroup v2.
func TestReadCPUTimeOfRoot(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Skip(err)
	}
	got, err := ReadCPUTime(root)
	if err != nil {
		t.Fatal(err)
	}
	if got.User+got.System <= 0 {
		t.Fatalf("the root cgroup has run nothing: %+v", got)
	}
}
