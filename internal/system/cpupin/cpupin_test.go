package cpupin

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in, want string
		pins     Pins
		explicit bool
	}{
		{"", "auto", Pins{}, false},
		{"auto", "auto", Pins{}, false},
		{"none", "none", Pins{}, false},
		{"1", "1", Pins{Pinned: true, Client: 1, Server: 1}, true},
		{" 0,1 ", "0,1", Pins{Pinned: true, Client: 0, Server: 1}, true},
		{"3,3", "3", Pins{Pinned: true, Client: 3, Server: 3}, true},
	}
	for _, c := range cases {
		s, err := Parse(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		p, ok := s.Explicit()
		if s.String() != c.want || p != c.pins || ok != c.explicit {
			t.Errorf("%q: got %q %+v %v, want %q %+v %v", c.in, s, p, ok, c.want, c.pins, c.explicit)
		}
		// What String writes, Parse reads back.
		if back, err := Parse(s.String()); err != nil || back != s {
			t.Errorf("%q: round trip gave %+v, %v", c.in, back, err)
		}
	}
	for _, bad := range []string{"x", "-1", "0,1,2", "1,", "0-1", "one,two"} {
		_, err := Parse(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--cpu-affinity") || strings.Contains(msg, "\n") {
			t.Errorf("%q: error %q should be one line naming the flag", bad, msg)
		}
	}
	var zero Setting
	if !zero.IsAuto() || zero.String() != Auto {
		t.Errorf("the zero Setting is %q, want auto", zero)
	}
}

// auto pins every test to the last allowed CPU; explicit CPUs apply to
// every test; none to none.
func TestResolve(t *testing.T) {
	allowed := []int{0, 1}
	both1 := Pins{Pinned: true, Client: 1, Server: 1}
	cases := []struct {
		setting string
		want    Pins
	}{
		{"auto", both1},
		{"none", Pins{}},
		{"0,1", Pins{Pinned: true, Client: 0, Server: 1}},
		{"1", both1},
	}
	for _, c := range cases {
		if got := MustParse(c.setting).Resolve(allowed); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.setting, got, c.want)
		}
	}
	if got := MustParse("auto").Resolve([]int{2, 5, 7}); got.Client != 7 || got.Server != 7 {
		t.Errorf("auto on CPUs 2,5,7: %+v, want both on 7", got)
	}
	if got := (Pins{Pinned: true, Client: 0, Server: 1}).Describe(); got != "client CPU 0, server CPU 1" {
		t.Errorf("describe: %q", got)
	}
}

func TestCheck(t *testing.T) {
	allowed := []int{0, 1}
	for _, ok := range []string{"auto", "none", "1", "0,1"} {
		if err := MustParse(ok).Check(allowed); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	err := MustParse("0,2").Check(allowed)
	if err == nil || !strings.Contains(err.Error(), "CPU 2 is not one vnetlab may run on here (0-1)") {
		t.Errorf("0,2 on 0-1: %v", err)
	}
}

func TestLists(t *testing.T) {
	for _, c := range []struct {
		list []int
		text string
	}{{[]int{0, 1}, "0-1"}, {[]int{1}, "1"}, {[]int{0, 2, 3, 4, 7}, "0,2-4,7"}} {
		if got := FormatList(c.list); got != c.text {
			t.Errorf("%v: %q, want %q", c.list, got, c.text)
		}
		if got, err := ParseList(c.text); err != nil || !slices.Equal(got, c.list) {
			t.Errorf("%q: %v %v, want %v", c.text, got, err, c.list)
		}
	}
	for _, bad := range []string{"", "a", "3-1"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// allowedOf reads /proc/PID/task/TID/status's Cpus_allowed_list.
func allowedOf(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			cpus, err := ParseList(v)
			if err != nil {
				t.Fatal(err)
			}
			return cpus
		}
	}
	t.Fatalf("%s has no Cpus_allowed_list", path)
	return nil
}

// A program started through StartOn runs on the CPU from its start, and
// the starting thread gets its own mask back.
func TestStartOn(t *testing.T) {
	allowed, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cpu := allowed[len(allowed)-1]
	c := exec.Command("sleep", "10")
	if err := StartOn(cpu, c.Start); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	if got := allowedOf(t, "/proc/"+strconv.Itoa(c.Process.Pid)+"/status"); !slices.Equal(got, []int{cpu}) {
		t.Errorf("child runs on %v, want [%d]", got, cpu)
	}
	if now, _ := Allowed(); !slices.Equal(now, allowed) {
		t.Errorf("this thread's CPUs are %v after StartOn, want %v back", now, allowed)
	}
	if err := StartOn(len(allowed)+1000, exec.Command("true").Start); err == nil {
		t.Error("StartOn an absent CPU succeeded")
	}
}

// PinSelf pins every thread of the process; restored at the end.
func TestPinSelf(t *testing.T) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := setAll(&orig); err != nil {
			t.Fatal(err)
		}
	}()
	allowed, _ := Allowed()
	cpu := allowed[0]
	if err := PinSelf(cpu); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if got := allowedOf(t, "/proc/self/task/"+task.Name()+"/status"); !slices.Equal(got, []int{cpu}) {
			t.Errorf("thread %s runs on %v, want [%d]", task.Name(), got, cpu)
		}
	}
	if len(tasks) < 2 {
		t.Errorf("only %d thread(s): the test did not exercise a multi-threaded process", len(tasks))
	}
}
