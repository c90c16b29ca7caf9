package bench

import (
	"strings"
	"testing"
	"time"
)

// Bad readiness specs are refused in one line naming the flag, before any
// cluster is touched; the default passes.
func TestReadinessSpecCheck(t *testing.T) {
	if err := DefaultReadinessSpec().Check(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for _, c := range []struct {
		change func(*ReadinessSpec)
		flag   string
	}{
		{func(s *ReadinessSpec) { s.Bursts = nil }, "--pods"},
		{func(s *ReadinessSpec) { s.Bursts = []int{1, 0} }, "--pods"},
		{func(s *ReadinessSpec) { s.Bursts = []int{MaxBurst + 1} }, "--pods"},
		{func(s *ReadinessSpec) { s.Repeat = 0 }, "--repeat"},
		{func(s *ReadinessSpec) { s.Timeout = time.Millisecond }, "--timeout"},
		{func(s *ReadinessSpec) { s.Every = 2 * time.Second }, "--interval"},
		{func(s *ReadinessSpec) { s.Local = []string{"a", "a"} }, "--cluster"},
		{func(s *ReadinessSpec) { s.Local = []string{"a", ""} }, "--cluster"},
		{func(s *ReadinessSpec) { s.Local, s.Kubeconfig = []string{"a"}, "/k" }, "--cluster"},
	} {
		s := DefaultReadinessSpec()
		c.change(&s)
		err := s.Check()
		if err == nil || !strings.Contains(err.Error(), c.flag) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v; want one line naming %s", s, err, c.flag)
		}
	}
}
