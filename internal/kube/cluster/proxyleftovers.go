package cluster

// What a switch of a cluster's Service proxy (kube set-proxy) must not
// leave of another proxy, beside Leftovers (what kube down must not leave).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// ProxyLeftovers says what of a proxy other than want's local cluster st's
// nodes hold ("" = nothing): kube-proxy's iptables chains (unless want is
// iptables, or route_localnet set), its nftables tables (unless
// nftables), vnetlab's socket programs, NodePort programs and Service
// entries (unless want is vnetlab's), pods' tc programs (unless
// vnetlab-ebpf; veth-ebpf's are the CNI's), a plane no CNI owns (unless
// vnetlab's), host_via_stack_on set under vnetlab's proxy; and each node
// must run one proxy, serving want's mode on its status port.
func ProxyLeftovers(ctx context.Context, st *lab.State, want clusternet.Network) string {
	n := Network(st)
	byCNI := n.CNI == clusternet.CNIVnetlab && n.CNIMode == modes.VethEBPF
	vnetlab := clusternet.IsVnetlab(want.Proxy)
	running := proxiesByNode(st.Name)
	var left []string
	for _, nd := range st.Nodes {
		say := func(format string, a ...any) { left = append(left, nd.Name+": "+fmt.Sprintf(format, a...)) }
		if l, err := kubeProxyLeft(ctx, nd.NS, want.Proxy); err != nil {
			say("%v", err)
		} else if l != "" {
			say("%s", l)
		}
		if want.Proxy != clusternet.IPTables {
			if v, _ := nsutil.ReadSysctl(nd.NS, "net.ipv4.conf.all.route_localnet"); v == "1" {
				say("route_localnet=1")
			}
		}
		plane := ProxyPlane(st.Name, nd.Name)
		dir := tcbpf.PinDir(plane)
		if exists(dir) {
			if !vnetlab && !byCNI {
				say("pins %s (a vnetlab proxy's plane)", dir)
			}
			if !vnetlab {
				for _, p := range sockPins(dir) {
					say("socket programs' pin %s", p)
				}
				if k := pinsUnder(filepath.Join(dir, tcbpf.UplinksDir)); k > 0 {
					say("%d NodePort program pins under %s", k, filepath.Join(dir, tcbpf.UplinksDir))
				}
				if k, err := tcbpf.ServiceEntries(plane); err != nil || k > 0 {
					say("%d Service entries in %s (%v)", k, dir, err)
				}
			}
			if !byCNI && want.Proxy != clusternet.VnetlabEBPF {
				if k := pinsUnder(filepath.Join(dir, tcbpf.EndpointsDir)); k > 0 {
					say("%d pods' tc programs under %s", k, filepath.Join(dir, tcbpf.EndpointsDir))
				}
			}
			if vnetlab && byCNI {
				if on, err := tcbpf.ViaStackOn(plane); on || err != nil {
					say("host_via_stack_on set in %s (%v)", dir, err)
				}
			}
		}
		if got := running[nd.Name]; got != 1 {
			say("%d proxies running, want 1", got)
		}
		if mode, err := proxyMode(ctx, nd.NS); err != nil || mode != want.Proxy {
			say("the status port says proxy mode %q (%v), want %s", mode, err, want.Proxy)
		}
	}
	return strings.Join(left, "; ")
}

// kubeProxyLeft says what of kube-proxy's rules namespace ns holds, but
// those of mode keep ("" = none): its nftables tables (ip and ip6
// kube-proxy) and its iptables chains (iptables-save and ip6tables-save:
// nat and filter's KUBE-SERVICES, KUBE-SVC-*, ... but not kubelet's).
func kubeProxyLeft(ctx context.Context, ns, keep string) (string, error) {
	var left []string
	if keep != clusternet.NFTables {
		out, err := proc.Command(ctx, ns, "nft", "list", "tables").Output()
		if err != nil {
			return "", fmt.Errorf("nft list tables: %w", err)
		}
		left = append(left, kubeProxyTables(string(out))...)
	}
	if keep != clusternet.IPTables {
		for _, save := range []string{"iptables-save", "ip6tables-save"} {
			out, err := proc.Command(ctx, ns, save).Output()
			if err != nil {
				if save == "ip6tables-save" {
					continue // a namespace without IPv6's tables holds none of its chains
				}
				return "", fmt.Errorf("%s: %w", save, err)
			}
			if k := kubeProxyChains(string(out)); k > 0 {
				left = append(left, fmt.Sprintf("%d kube-proxy chains (%s)", k, save))
			}
		}
	}
	return strings.Join(left, ", "), nil
}

// kubeProxyTables are the kube-proxy tables an `nft list tables` lists.
func kubeProxyTables(listing string) []string {
	var out []string
	for _, line := range strings.Split(listing, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" && f[2] == "kube-proxy" {
			out = append(out, "table "+f[1]+" kube-proxy")
		}
	}
	return out
}

// kubeProxyChains counts the chains of an iptables-save listing that are
// kube-proxy's iptables mode's (kubelet's own KUBE-KUBELET-CANARY,
// KUBE-IPTABLES-HINT and KUBE-FIREWALL are not, nor KUBE-PROXY-CANARY:
// kube-proxy --cleanup leaves mangle's, an empty chain).
func kubeProxyChains(saved string) int {
	n := 0
	for _, line := range strings.Split(saved, "\n") {
		name, ok := strings.CutPrefix(line, ":")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		switch {
		case name == "KUBE-SERVICES", name == "KUBE-NODEPORTS", name == "KUBE-EXTERNAL-SERVICES", name == "KUBE-FORWARD", name == "KUBE-PROXY-FIREWALL",
			name == "KUBE-POSTROUTING", name == "KUBE-MARK-MASQ",
			strings.HasPrefix(name, "KUBE-SVC-"), strings.HasPrefix(name, "KUBE-SEP-"), strings.HasPrefix(name, "KUBE-EXT-"),
			strings.HasPrefix(name, "KUBE-FW-"), strings.HasPrefix(name, "KUBE-SVL-"):
			n++
		}
	}
	return n
}

// sockPins lists the socket programs' pins in a plane's directory.
func sockPins(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if sock.IsSockPin(e.Name()) && (e.Name() != sock.LinksDir || pinsUnder(filepath.Join(dir, e.Name())) > 0) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// pinsUnder counts the entries of directory dir (none when it is absent).
func pinsUnder(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

// proxiesByNode counts cluster name's running node proxies, by node.
func proxiesByNode(name string) map[string]int {
	out := map[string]int{}
	for _, pid := range lab.Procs(name) {
		if d, ok := daemonAt(pid); ok && d.Role == RoleProxy {
			out[d.Node]++
		}
	}
	return out
}

// proxyMode asks the proxy of the node whose namespace is ns its mode
// (/proxyMode on its status port: kube-proxy's and vnetlab's serve it).
func proxyMode(ctx context.Context, ns string) (string, error) {
	s, err := NodeProxyGet(ctx, ns, "/proxyMode")
	return strings.TrimSpace(s), err
}

// NodeProxyGet reads path (/metrics, /proxyMode) from the status port of
// the proxy of the node whose namespace is ns, dialled from inside it.
func NodeProxyGet(ctx context.Context, ns, path string) (string, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nsutil.Do(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxyMetricsAddr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s%s: %s", proxyMetricsAddr, path, resp.Status)
	}
	return string(body), nil
}
