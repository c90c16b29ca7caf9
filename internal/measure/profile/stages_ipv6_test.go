package profile

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// ipv6Patterns are the function patterns of stages.rules, as ParseRules
// read them ("name" or "prefix*"), that name IPv6 functions: a 6 in the
// name (ip6_*, fib6_*, icmpv6_*, ...) or an IPv6-only family without one.
func ipv6Patterns() []string {
	var all []string
	for fn := range DefaultRules.exact {
		all = append(all, fn)
	}
	for _, p := range DefaultRules.prefixes {
		all = append(all, p.prefix+"*")
	}
	sort.Strings(all)
	var out []string
	for _, p := range all {
		name := strings.TrimLeft(p, "_")
		if strings.Contains(p, "6") || strings.HasPrefix(name, "ndisc") || strings.HasPrefix(name, "mld") || strings.HasPrefix(name, "addrconf") {
			out = append(out, p)
		}
	}
	return out
}

func matchesPattern(fn, p string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(fn, prefix)
	}
	return fn == p
}

// kallsymsIPv6 lists the kernel functions the IPv6 rules are checked
// against; VNETLAB_UPDATE_KALLSYMS=1 rewrites it from this machine's
// /proc/kallsyms (as root, after adding a rule or on a new kernel).
const kallsymsIPv6 = "testdata/kallsyms-ipv6.txt"

// Every IPv6 pattern names functions this machine's kernel has (a rule
// with a misspelt or inlined name would never match, and its stage would
// silently lose the samples to its caller's).
func TestIPv6RulesMatchTheKernel(t *testing.T) {
	if os.Getenv("VNETLAB_UPDATE_KALLSYMS") == "1" {
		writeKallsymsIPv6(t)
	}
	b, err := os.ReadFile(kallsymsIPv6)
	if err != nil {
		t.Fatal(err)
	}
	var syms []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			syms = append(syms, l)
		}
	}
	ps := ipv6Patterns()
	if len(ps) < 40 {
		t.Fatalf("only %d IPv6 patterns in stages.rules: %v", len(ps), ps)
	}
	for _, p := range ps {
		n := 0
		for _, s := range syms {
			if matchesPattern(s, p) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("pattern %s matches no function of the kernel (testdata/kallsyms-ipv6.txt)", p)
		}
	}
}

func writeKallsymsIPv6(t *testing.T) {
	k, err := LoadKallsyms()
	if err != nil {
		t.Fatal(err)
	}
	var uname unix.Utsname
	if err := unix.Uname(&uname); err != nil {
		t.Fatal(err)
	}
	ps := ipv6Patterns()
	seen := map[string]bool{}
	var names []string
	for _, sym := range k.names {
		fn := FunctionName(sym)
		if seen[fn] || !slices.ContainsFunc(ps, func(p string) bool { return matchesPattern(fn, p) }) {
			continue
		}
		seen[fn] = true
		names = append(names, fn)
	}
	sort.Strings(names)
	head := fmt.Sprintf("# Functions of kernel %s (/proc/kallsyms, clone suffixes such as .isra.0 cut)\n"+
		"# that an IPv6 pattern of stages.rules matches: TestIPv6RulesMatchTheKernel checks\n"+
		"# the rules against them. VNETLAB_UPDATE_KALLSYMS=1 go test -run TestIPv6RulesMatchTheKernel rewrites it.\n",
		unix.ByteSliceToString(uname.Release[:]))
	if err := os.WriteFile(kallsymsIPv6, []byte(head+strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// IPv6 stacks as this kernel runs them go to the same stages as their IPv4
// counterparts: forwarding and route lookups to routing, output and input
// and the neighbour path to IP, ip6tables and nftables to the tables.
func TestAttributeIPv6(t *testing.T) {
	rx := []string{"handle_softirqs", "net_rx_action", "__napi_poll", "process_backlog", "__netif_receive_skb_one_core", "ipv6_rcv"}
	in := func(frames ...string) Stack {
		return stack("ksoftirqd/0", append(append([]string{}, rx...), frames...)...)
	}
	tx := []string{UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_sendto", "__sys_sendto", "inet6_sendmsg", "tcp_sendmsg", "tcp_sendmsg_locked", "tcp_push", "__tcp_push_pending_frames", "tcp_write_xmit", "__tcp_transmit_skb", "inet6_csk_xmit", "ip6_xmit"}
	out := func(frames ...string) Stack {
		return labStack("iperf3", append(append([]string{}, tx...), frames...)...)
	}
	for _, c := range []struct {
		st   Stack
		want string
	}{
		{in("ip6_rcv_core"), "ip"},
		{in("ip6_rcv_finish", "ip6_route_input", "ip6_pol_route_input", "ip6_pol_route", "fib6_table_lookup", "fib6_node_lookup"), "routing"},
		{in("ip6_rcv_finish", "ip6_forward"), "routing"},
		{in("ip6_rcv_finish", "ip6_forward", "ip6_forward_finish", "ip6_output", "ip6_finish_output", "ip6_finish_output2", "_raw_spin_lock"), "ip"},
		{in("ip6_rcv_finish", "ip6_forward", "ip6_output", "ip6_finish_output2", "neigh_resolve_output", "__neigh_event_send", "neigh_probe", "ndisc_solicit", "ndisc_send_ns", "ndisc_send_skb"), "ip"},
		{in("ip6_rcv_finish", "ip6_input", "ip6_input_finish", "ip6_protocol_deliver_rcu", "icmpv6_rcv", "ndisc_rcv", "ndisc_recv_ns"), "ip"},
		{in("ip6_rcv_finish", "ip6_input", "ip6_input_finish", "ip6_protocol_deliver_rcu", "tcp_v6_rcv", "__inet6_lookup_established", "inet6_ehashfn"), "tcp_udp"},
		{in("ip6_rcv_finish", "ip6_input", "ip6_input_finish", "ip6_protocol_deliver_rcu", "udpv6_rcv", "__udp6_lib_rcv", "udp6_unicast_rcv_skb"), "tcp_udp"},
		{in("ip6_rcv_finish", "ip6_forward", "icmp6_send", "icmpv6_push_pending_frames"), "ip"},
		// netfilter on the IPv6 hooks
		{in("nf_hook_slow", "ipv6_conntrack_in", "nf_conntrack_in", "__nf_conntrack_find_get"), "conntrack"},
		{in("nf_hook_slow", "ipv6_defrag"), "conntrack"},
		{in("nf_hook_slow", "nf_nat_ipv6_in", "nf_nat_ipv6_fn", "nf_nat_inet_fn"), "nat"},
		{in("nf_hook_slow", "ip6t_do_table", "_raw_spin_lock"), "tables"},
		{in("nf_hook_slow", "ip6table_mangle_hook", "ip6t_do_table"), "tables"},
		{in("nf_hook_slow", "nft_do_chain_ipv6", "nft_do_chain"), "tables"},
		{stack("ksoftirqd/0", "net_rx_action", "br_handle_frame", "br_nf_pre_routing_ipv6", "br_validate_ipv6"), "br_netfilter"},
		// output: from the socket to the device, and the source address choice
		{out("ip6_output", "ip6_finish_output", "ip6_finish_output2", "__dev_queue_xmit"), "netdev"},
		{out("ip6_output", "ip6_finish_output2"), "ip"},
		{out("nf_hook_slow", "ipv6_conntrack_local", "nf_conntrack_in"), "conntrack"},
		{labStack("iperf3", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_connect", "__sys_connect", "inet_stream_connect", "tcp_v6_connect", "ip6_dst_lookup_flow", "ip6_dst_lookup_tail", "ipv6_dev_get_saddr", "__ipv6_dev_get_saddr"), "routing"},
		{labStack("sockperf", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_sendto", "__sys_sendto", "udpv6_sendmsg", "ip6_make_skb", "__ip6_append_data"), "ip"},
		{labStack("sockperf", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_recvfrom", "__sys_recvfrom", "inet6_recvmsg", "_copy_to_iter"), "syscall"},
		{labStack("vnetlab", "tcp_v6_rcv", "bpf_ipv6_fib_lookup"), "tc_bpf"},
		// configuration: an address's duplicate detection, a route added
		{stack("kworker/0:1", "ret_from_fork", "kthread", "worker_thread", "process_one_work", "addrconf_dad_work", "ndisc_send_ns", "ndisc_send_skb", "ip6_output"), "control"},
		{stack("ip", UserFrame, "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__sys_sendmsg", "netlink_sendmsg", "netlink_unicast", "rtnetlink_rcv_msg", "inet6_rtm_newroute", "ip6_route_add", "fib6_add", "fib6_add_1"), "control"},
	} {
		if got := DefaultRules.Attribute(c.st); got != c.want {
			t.Errorf("%s: stage %s, want %s", strings.Join(c.st.Frames, ";"), got, c.want)
		}
	}
}
