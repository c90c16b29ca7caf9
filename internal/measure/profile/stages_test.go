package profile

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// recorded is a profile recorded on this machine (testdata), with the
// transactions its window saw.
type recorded struct {
	Profile
	Transactions float64 `json:"transactions"`
}

func loadRecorded(t *testing.T, name string) *recorded {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// stageOf is a summary's stage id, zero when absent.
func stageOf(s *Summary, id string) StageCost {
	for _, c := range s.Stages {
		if c.Stage == id {
			return c
		}
	}
	return StageCost{Stage: id}
}

// functionOf is a summary's function, and whether it kept it.
func functionOf(s *Summary, name string) (FunctionCost, bool) {
	for _, f := range s.Functions {
		if f.Name == name {
			return f, true
		}
	}
	return FunctionCost{Name: name}, false
}

// eventOf is a summary's event, zero when absent.
func eventOf(s *Summary, name string) EventRate {
	for _, e := range s.Events {
		if e.Name == name {
			return e
		}
	}
	return EventRate{Name: name}
}

func stack(comm string, frames ...string) Stack { return Stack{Comm: comm, Frames: frames, Count: 1} }

// labStack is a stack of a process in a lab's namespace.
func labStack(comm string, frames ...string) Stack {
	s := stack(comm, frames...)
	s.Lab = true
	return s
}

func TestAttributeInnermostClaimedFrame(t *testing.T) {
	r := DefaultRules
	for _, c := range []struct {
		st   Stack
		want string
	}{
		// a helper leaf goes to the caller that a rule claims
		{labStack("vnetlab", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_sendto", "tcp_sendmsg", "tcp_sendmsg_locked", "_raw_spin_unlock_irqrestore"), "tcp_udp"},
		{labStack("vnetlab", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_recvfrom", "_copy_to_iter"), "syscall"},
		{labStack("vnetlab", "handle_softirqs", "net_rx_action", "__napi_poll", "process_backlog", "__netif_receive_skb_one_core", "ip_rcv", "ip_rcv_finish_core", "ip_route_input_noref", "ip_route_input_slow", "fib_table_lookup"), "routing"},
		{labStack("vnetlab", "net_rx_action", "__napi_poll", "process_backlog", "ip_forward"), "routing"},
		// a longer prefix wins: br_nf_* over br_*
		{stack("ksoftirqd/0", "net_rx_action", "br_handle_frame", "br_nf_pre_routing", "memcpy"), "br_netfilter"},
		{stack("ksoftirqd/0", "net_rx_action", "br_handle_frame", "br_handle_frame_finish"), "bridge"},
		{stack("ksoftirqd/0", "net_rx_action", "nf_hook_slow", "nf_conntrack_in", "__nf_conntrack_find_get"), "conntrack"},
		{stack("ksoftirqd/0", "net_rx_action", "nf_hook_slow", "nft_do_chain_ipv4", "nft_do_chain"), "tables"},
		{labStack("vnetlab", "dev_hard_start_xmit", "macvlan_start_xmit", "kmem_cache_free"), "macvlan"},
		{stack("swapper", "common_startup_64", "cpu_startup_entry", "do_idle", "default_idle", "pv_native_safe_halt"), "idle"},
		// softirq work on an idle CPU is the data path
		{stack("swapper", "do_idle", "handle_softirqs", "net_rx_action", "__napi_poll", "process_backlog", "veth_poll"), "veth"},
		// user-space samples: by process
		{labStack("iperf3", UserFrame), "engine"},
		{labStack("ovs-vswitchd", UserFrame), "ovs"},
		{stack("ovs-vswitchd", UserFrame), StageOther}, // not a lab's (a system daemon)
		{stack("compile", UserFrame), StageOther},
		// a compiler's read() is not the data path, a test engine's is
		{stack("compile", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_read", "vfs_read", "filemap_read"), StageOther},
		{labStack("sockperf", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "asm_exc_page_fault", "handle_mm_fault"), "syscall"},
		{labStack("sockperf", UserFrame, "asm_exc_page_fault", "handle_mm_fault"), StageKernelOther},
		// a net frame makes any process's stack the data path
		{stack("compile", UserFrame, "asm_sysvec_apic_timer_interrupt", "handle_softirqs", "net_rx_action", "__napi_poll", "process_backlog", "enqueue_to_backlog"), "veth"},
		{labStack("vnetlab", "tcp_v4_rcv", BPFFrame), "tc_bpf"},
		// loading a BPF program, tearing a namespace down: configuration, even
		// where the innermost frame is packet code
		{stack("vnetlab", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_bpf", "__sys_bpf", "bpf_check"), "control"},
		{stack("kworker/u8:1", "ret_from_fork", "kthread", "worker_thread", "cleanup_net", "unregister_netdevice_many_notify", "veth_dellink"), "control"},
		{labStack("iptables-restor", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_setsockopt", "nf_setsockopt", "do_ipt_set_ctl", "translate_table"), "control"},
		{stack("vnetlab", UserFrame), StageOther},
	} {
		if got := r.Attribute(c.st); got != c.want {
			t.Errorf("%s %s: stage %s, want %s", c.st.Comm, strings.Join(c.st.Frames, ";"), got, c.want)
		}
	}
}

func TestParseRulesRejects(t *testing.T) {
	for _, text := range []string{
		"tcp_*",                                // pattern before a stage
		"stage a net A\n x\nstage b net B\n x", // claimed twice
		"stage a fast A",                       // unknown kind
		"stage a net A\nstage a net B",         // stage twice
		"stage a net",                          // no name
		"stage a net A\n iptable_*_hook",       // * inside a pattern matches nothing
	} {
		if _, err := ParseRules(text); err == nil {
			t.Errorf("ParseRules(%q) accepted", text)
		}
	}
}

// The recorded tcp_rr profiles show the known structure of each mode.
func TestRecordedStructure(t *testing.T) {
	sum := map[string]*Summary{}
	for _, m := range []string{"veth-routed", "macvlan", "bridge"} {
		r := loadRecorded(t, "tcp_rr-"+m)
		s := Summarize(&r.Profile, DefaultRules, r.Transactions, "transaction")
		sum[m] = s
		for _, c := range s.Stages {
			t.Logf("%-12s %-16s %6d samples %6.2f µs/trans %5.1f%%", m, c.Stage, c.Samples, c.US, 100*c.Share)
		}
		if stageOf(s, StageOther).Samples == 0 {
			t.Errorf("%s: the compiles running beside the recording are not \"other\"", m)
		}
		if stageOf(s, "tcp_udp").Samples == 0 || stageOf(s, "syscall").Samples == 0 {
			t.Errorf("%s: no TCP or syscall samples in a tcp_rr profile", m)
		}
	}
	if _, ok := functionOf(sum["veth-routed"], "ip_forward"); !ok {
		t.Error("veth-routed: ip_forward not among the functions")
	}
	if f, ok := functionOf(sum["macvlan"], "ip_forward"); ok && f.Inclusive > 0 {
		t.Errorf("macvlan forwards in the node: %+v", f)
	}
	if stageOf(sum["macvlan"], "macvlan").Samples == 0 {
		t.Error("macvlan: no macvlan stage")
	}
	if stageOf(sum["bridge"], "br_netfilter").Samples == 0 || stageOf(sum["bridge"], "bridge").Samples == 0 {
		t.Error("bridge: no bridge or br_netfilter samples (the lab has bridge_nf_call_iptables on)")
	}
	if eventOf(sum["veth-routed"], EventFibLookup).PerUnit < 1 || eventOf(sum["macvlan"], EventFibLookup).PerUnit > 0.1 {
		t.Errorf("FIB lookups per transaction: veth-routed %.2f, macvlan %.2f", eventOf(sum["veth-routed"], EventFibLookup).PerUnit, eventOf(sum["macvlan"], EventFibLookup).PerUnit)
	}
}
