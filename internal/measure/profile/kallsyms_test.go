package profile

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

func TestKallsymsNames(t *testing.T) {
	k, err := ParseKallsyms(strings.NewReader(`ffffffff81000000 T _stext
ffffffff81000100 t ip_forward
ffffffff81000200 t tcp_v4_rcv.part.0
ffffffff81000300 T bpf_prog_load
ffffffff81000400 d some_data
ffffffff82000000 T _etext
ffffffff837f8910 T _einittext
ffffffffa0001000 t bpf_prog_6deef7357e7b4530_on_sample	[bpf]
`))
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[uint64]string{
		0xffffffff81000150: "ip_forward",
		0xffffffff81000210: "tcp_v4_rcv",    // clone suffix stripped
		0xffffffff81000310: "bpf_prog_load", // a kernel function, not a program
		0xffffffff81000410: "bpf_prog_load", // data symbols do not name code
		0xffffffff90000000: BPFFrame,        // past the kernel's text: JIT code
		0xffffffffa0001010: BPFFrame,
		0xffffffff80000000: "0xffffffff80000000",
	} {
		if got := k.Name(ip); got != want {
			t.Errorf("Name(%#x) = %q, want %q", ip, got, want)
		}
	}
	if a, ok := k.Address("some_data"); !ok || a != 0xffffffff81000400 {
		t.Errorf("Address(some_data) = %#x %v", a, ok)
	}
	if got := k.Stack([]uint64{0xffffffff81000210, 0xffffffff81000150, 0}); len(got) != 2 || got[0] != "ip_forward" {
		t.Errorf("Stack: %v (want root first)", got)
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := cpupin.ParseList("0-1,4")
	if err != nil || len(got) != 3 || got[2] != 4 {
		t.Errorf("cpupin.ParseList: %v %v", got, err)
	}
	if _, err := cpupin.ParseList("a-b"); err == nil {
		t.Error("cpupin.ParseList(a-b) accepted")
	}
}
