package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// PolicyDir is the node's policy plane under its eBPF plane's pin
// directory (tcbpf.PinDir of the plane the node's CNI and Service proxy
// share), as a lab's is under the lab's: kube down removes the node's pin
// directory, and the policy maps and links with it.
const PolicyDir = "policy"

// PlaneDir is where the policy plane of the node whose eBPF plane is plane
// is pinned.
func PlaneDir(plane string) string { return filepath.Join(tcbpf.PinDir(plane), PolicyDir) }

// ebpfBackend: internal/datapath/polbpf's programs on every pod of the
// node (its eth0, in its namespace), for CNI modes whose pod-to-pod
// packets never cross the node's netfilter (veth-ebpf: bpf_redirect_peer).
// While a policy isolates some pod, the programs are attached to the
// node's pods that lack them at every Apply (pods created after a policy
// included); with none, no pod carries them (anyIsolated). A pod's
// namespace takes its programs with it, and its pins go at the next Apply.
//
// The maps hold the rules of every pod of the cluster, not only the
// node's: a pod's egress to a clusterIP is translated by the Service
// proxy's programs after the pod's eth0 (vnetlab-ebpf without socket LB),
// so pol_egress defers it (polbpf.Frontends) and the backend's pol_ingress
// decides it, looking the sender up in its own node's maps. The backend
// may be on another node: that node's maps must know the sender's egress
// rules, or the Service would carry the pod past them.
type ebpfBackend struct {
	plane string // the node's eBPF plane (tcbpf)
	pods  *podIfs
	// node are the node's own addresses: its pods always reach it and it
	// them (kubelet's probes), as with the rules in the node's forward
	// hook, which the node's own packets never cross.
	node []netip.Prefix
	// fam is the family of the node's addresses: its pods', for which the
	// plane's maps are made (polbpf.OpenFamily).
	fam family.Family

	pl       *polbpf.Plane
	fe4, fe6 *ebpf.Map
	last     *netpol.Rules
}

// NewEBPF is the eBPF backend of the node whose eBPF plane is plane (kube
// up's ProxyPlane), finding its pods' namespaces under containerd's state
// directory. It runs in the node's namespace, whose addresses it reads.
func NewEBPF(plane, containerdState string) (Backend, error) {
	node, err := ownAddrs()
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, len(node))
	for i, p := range node {
		addrs[i] = p.Addr()
	}
	return &ebpfBackend{plane: plane, pods: newPodIfs(containerdState), node: node, fam: family.OfAddrs(addrs)}, nil
}

func (b *ebpfBackend) Name() string {
	return "eBPF (polbpf programs on the pods' interfaces, maps in " + PlaneDir(b.plane) + ")"
}

func (b *ebpfBackend) Everywhere() bool { return true }

// open opens the plane once (it stays open while the controller runs:
// Close).
func (b *ebpfBackend) open() error {
	if b.pl != nil {
		return nil
	}
	pl, err := polbpf.OpenFamily(PlaneDir(b.plane), b.fam, polbpf.Frontends{})
	if err != nil {
		return err
	}
	b.pl = pl
	return nil
}

// frontends gives the programs the node's Service frontends before their
// first Attach. The node's Service proxy creates them: the backend only
// opens them once pinned, never racing the proxy to create them (a proxy
// whose pin another process made first exits).
func (b *ebpfBackend) frontends() error {
	if b.fe4 != nil {
		return nil
	}
	if !tcbpf.HasFrontends(b.plane) {
		return fmt.Errorf("the node's Service plane %s has no frontends yet (vnetlab's Service proxy makes them)", tcbpf.PinDir(b.plane))
	}
	v4, v6, err := tcbpf.FrontendMaps(b.plane)
	if err != nil {
		return err
	}
	b.fe4, b.fe6 = v4, v6
	b.pl.UseFrontends(polbpf.Frontends{V4: v4, V6: v6})
	return nil
}

// Apply loads r with the node's addresses allowed (withNode): rules of
// their own, so changes are not the tracker's to trust (it compares).
func (b *ebpfBackend) Apply(r *netpol.Rules, _ []netpol.PodChange, attach map[string]bool) error {
	if err := b.open(); err != nil {
		return err
	}
	r = b.withNode(r, attach)
	if b.last == nil || !reflect.DeepEqual(r, b.last) {
		if _, err := b.pl.Load(r); err != nil {
			return err
		}
		b.last = r
	}
	ifs := b.pods.byAddr()
	want := map[polbpf.Interface]bool{}
	var missing []string
	isolated := anyIsolated(r)
	for _, p := range r.Pods {
		key := p.Namespace + "/" + p.Pod
		if !attach[key] || !isolated {
			continue
		}
		i, ok := podInterface(ifs, p.IPs)
		if !ok {
			missing = append(missing, key)
			continue
		}
		want[i] = true
		if b.pl.Has(i) {
			continue
		}
		if err := b.frontends(); err != nil {
			return err
		}
		if err := b.pl.Attach(i); err != nil {
			return fmt.Errorf("pod %s: %w", key, err)
		}
	}
	// Pins of pods gone (their interface went with their namespace): the
	// pins are removed even when the detach fails.
	if pinned, err := b.pl.Pinned(); err == nil {
		for _, i := range pinned {
			if !want[i] {
				_ = b.pl.Detach(i)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no network namespace of the node holds the address of pod %s yet", strings.Join(missing, ", "))
	}
	return nil
}

// anyIsolated says whether a policy isolates any pod of the cluster, on
// either side. Until one does, no pod carries the programs (and a pod that
// carries them loses them when the last policy goes): a cluster without
// policies is measured on the CNI's bare path, as a lab without policies
// is. Once one does, every pod of the node carries them, isolated or not:
// an isolated pod's egress to a Service is decided at its backend's
// interface, whichever pod that is.
func anyIsolated(r *netpol.Rules) bool {
	for _, p := range r.Pods {
		if p.Ingress.Isolated || p.Egress.Isolated {
			return true
		}
	}
	return false
}

func podInterface(ifs map[netip.Addr]polbpf.Interface, ips []netip.Addr) (polbpf.Interface, bool) {
	for _, a := range ips {
		if i, ok := ifs[a]; ok {
			return i, true
		}
	}
	return polbpf.Interface{}, false
}

// withNode is r with the node's own addresses allowed both ways on every
// isolated side of the node's pods (attach).
func (b *ebpfBackend) withNode(r *netpol.Rules, attach map[string]bool) *netpol.Rules {
	out := &netpol.Rules{Pods: slices.Clone(r.Pods)}
	var blocks []netpol.Block
	for _, p := range b.node {
		blocks = append(blocks, netpol.Block{CIDR: p})
	}
	if len(blocks) == 0 {
		return out
	}
	node := &netpol.Allow{Blocks: blocks, AnyPort: true}
	for i := range out.Pods {
		p := &out.Pods[i]
		if !attach[p.Namespace+"/"+p.Pod] {
			continue
		}
		for _, s := range []*netpol.Side{&p.Ingress, &p.Egress} {
			if s.Isolated {
				s.Allow = append(slices.Clone(s.Allow), node)
			}
		}
	}
	return out
}

// ownAddrs are the addresses of the namespace the caller runs in, as
// single-address prefixes (loopback's and IPv6 link-local ones aside).
func ownAddrs() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("the node's addresses: %w", err)
	}
	var out []netip.Prefix
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() && ip.Is6() {
			continue
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// Close releases the backend's handles; the pinned maps and links stay (a
// restarted controller opens them again).
func (b *ebpfBackend) Close() error {
	if b.pl == nil {
		return nil
	}
	errs := []error{b.pl.Close()}
	if b.fe4 != nil {
		errs = append(errs, b.fe4.Close(), b.fe6.Close())
	}
	return errors.Join(errs...)
}
