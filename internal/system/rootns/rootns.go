// Package rootns snapshots the root network namespace (links, addresses,
// routes, rules, iptables, nftables, net.* sysctls and the machine-wide
// sysctls kubelet changes) so tests can prove vnetlab
// left it exactly as it found it.
package rootns

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Snapshot records the root namespace's links, addresses, routes, rules,
// firewall and net.* sysctls, without counters that change by themselves.
func Snapshot() map[string]string {
	s := map[string]string{}
	run := func(key string, args ...string) {
		out, err := exec.Command(args[0], args[1:]...).Output()
		if err != nil {
			s[key] = "error: " + err.Error()
			return
		}
		s[key] = string(out)
	}
	run("links", "ip", "-o", "link", "show")
	run("addrs", "ip", "-o", "addr", "show")
	run("routes", "ip", "route", "show", "table", "all")
	run("rules", "ip", "rule", "show")
	run("iptables", "iptables-save")
	run("ip6tables", "ip6tables-save") // IPv6 Services' rules (on nft's backend they show in "nft" too)
	run("nft", "nft", "list", "ruleset")
	run("sysctl", "sysctl", "-a", "-r", `^net\.`)
	// Machine-wide sysctls a kubelet changes at start (`vnetlab kube up`
	// records and restores them).
	run("kubelet-sysctls", append([]string{"sysctl"}, KubeletSysctls...)...)
	for _, k := range []string{"iptables", "ip6tables"} {
		s[k] = counters.ReplaceAllString(dropComments(s[k]), "[0:0]")
	}
	s["sysctl"] = dropDynamic(s["sysctl"])
	s["links"] = linkState.ReplaceAllString(s["links"], "")
	// vnetlab's own namespaces: any that appear during the suite were left behind.
	var ns []string
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), nsPrefix) {
				ns = append(ns, e.Name())
			}
		}
	}
	s[KeyNamespaces] = strings.Join(ns, "\n")
	// Their mounts too, also those beneath a later mount of /run/netns,
	// which no listing shows. /run/netns itself may stay a mount point
	// (iproute2 and vnetlab make it one and leave it): not compared.
	mounts, err := nsutil.MountedEntries(nsPrefix)
	if err != nil {
		mounts = []string{"error: " + err.Error()}
	}
	s[KeyNamespaceMounts] = strings.Join(mounts, "\n")
	return s
}

// nsPrefix starts vnetlab's namespace names (lab.NSPrefix; this package stays below lab).
const nsPrefix = "vnl-"

// KubeletSysctls are the machine-wide sysctls kubelet sets when it starts.
var KubeletSysctls = []string{"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory"}

var (
	counters  = regexp.MustCompile(`\[\d+:\d+\]`)
	linkState = regexp.MustCompile(`\\\s+link/.*`)
)

func dropComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// dynamic sysctls change on their own (counters, random seeds, entropy).
var dynamic = regexp.MustCompile(`^net\.(netfilter\.nf_conntrack_count|ipv4\.tcp_fastopen_key|ipv6\.conf\..*\.stable_secret|core\.netdev_rss_key|ipv4\.route\.gc_.*|ipv6\.route\.gc_.*|netfilter\.nf_conntrack_buckets|nf_conntrack_max|netfilter\.nf_conntrack_max)\b`)

func dropDynamic(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !dynamic.MatchString(l) {
			keep = append(keep, l)
		}
	}
	sort.Strings(keep)
	return strings.Join(keep, "\n")
}

// Diff describes what differs between two snapshots; "" when nothing changed.
//
// vnetlab's own namespaces and their mounts count only when they appear:
// one that was there before and is gone after was a stale lab of a killed
// run, which `vnetlab clean` (and every run's sweep) removes by design.
func Diff(a, b map[string]string) string {
	var out []string
	for k, va := range a {
		vb := b[k]
		if leaksOnly[k] {
			vb = appeared(va, vb)
			va = ""
		}
		if va != vb {
			out = append(out, fmt.Sprintf("--- %s before\n%s\n+++ %s after\n%s", k, clip(va), k, clip(vb)))
		}
	}
	return strings.Join(out, "\n")
}

// The snapshot's keys for vnetlab's own namespaces and their mounts.
const (
	KeyNamespaces      = "vnetlab-namespaces"
	KeyNamespaceMounts = "vnetlab-namespace-mounts"
)

// leaksOnly are the snapshot's keys compared by what appeared (Diff).
var leaksOnly = map[string]bool{KeyNamespaces: true, KeyNamespaceMounts: true}

// appeared returns b's lines that a lacks.
func appeared(a, b string) string {
	had := map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		had[l] = true
	}
	var out []string
	for _, l := range strings.Split(b, "\n") {
		if l != "" && !had[l] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "..."
	}
	return s
}
