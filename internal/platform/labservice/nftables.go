package labservice

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// nftables: kube-proxy's nftables mode (pkg/proxy/nftables/proxier.go) in
// the node's namespace: table ip kube-proxy, whose services chain does one
// lookup in the verdict map service-ips keyed by
// `ipv4_addr . inet_proto . inet_service`, going to the service's chain; there
// `numgen random mod N vmap` picks an endpoint chain (a plain goto when
// there is one), which DNATs. The lookup
// is a hash, so its cost does not grow with the number of services. Marking
// and masquerading for hairpin follow kube-proxy. Install writes the table
// in `nft -f -` transactions of nftChunk services; Update applies only the
// difference, with the map elements swapped in one transaction (atomic:
// packets see the old map or the new one; established connections keep
// their conntrack NAT).
//
// IPv6 Services live in their own table, ip6 kube-proxy, written by the
// same code (nfFamily) rather than in one inet table: as kube-proxy's
// dual-stack (one proxier and table per family), each lookup is one map
// keyed by its own address type, and an ipv4 lab's table is exactly what it
// was before IPv6 (its measurements stay comparable).
type nftablesProvider struct{}

func init() { Register(nftablesProvider{}) }

// NftTable is the table kube-proxy's nftables mode owns.
const NftTable = "kube-proxy"

func (nftablesProvider) Info() Info {
	return Info{Name: NFTables, IPv6: true, NodeNAT: true, Summary: "kube-proxy nftables mode: table ip (and ip6) kube-proxy, verdict map on daddr . proto . port (hash lookup), one nft -f"}
}
func (nftablesProvider) Supports(m modes.Mode) string { return netfilterSupports(m) }
func (nftablesProvider) Caveat(m modes.Mode, options map[string]string) string {
	return netfilterCaveat(m, options)
}

// nftChunk: services per nft transaction when loading many. One transaction
// of 100k services took 25 s and 2 GB of memory in nft here; chunks of 5000
// took 45 s and 300 MB (each nft run first reads the whole table). 25000
// sits between the two: four runs for 100k services.
const nftChunk = 25000

func (nftablesProvider) Install(st *lab.State, c *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error { return nftInstall(ns, f, st, c) })
}

func nftInstall(ns string, f nfFamily, st *lab.State, c *Config) error {
	w := nftWriter{podCIDR: f.podCIDR(st), f: f}
	if err := proc.Nft(ns, w.base()); err != nil {
		return err
	}
	svcs := f.of(c.All())
	for i := 0; i < len(svcs); i += nftChunk {
		chunk := svcs[i:min(i+nftChunk, len(svcs))]
		if err := proc.Nft(ns, w.serviceChains(chunk, nil)+w.elements("add", chunk)); err != nil {
			return err
		}
	}
	return nil
}

// Update changes only what differs from old: new services' chains first,
// then one transaction swapping map elements and deleting stale chains. A
// service whose backends change gets new chains (their names hash the
// backends), so its element switches atomically.
func (nftablesProvider) Update(st *lab.State, old, c *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error { return nftUpdate(ns, f, st, old, c) })
}

func nftUpdate(ns string, f nfFamily, st *lab.State, old, c *Config) error {
	added, removed, had, want := nftChains.diff(f.of(old.All()), f.of(c.All()))
	w := nftWriter{podCIDR: f.podCIDR(st), f: f}
	var b strings.Builder
	if len(added) <= nftChunk {
		b.WriteString(w.serviceChains(added, had)) // one run: nft reads the table once
	} else {
		for i := 0; i < len(added); i += nftChunk {
			if err := proc.Nft(ns, w.serviceChains(added[i:min(i+nftChunk, len(added))], had)); err != nil {
				return err
			}
		}
	}
	b.WriteString(w.elements("delete", removed))
	b.WriteString(w.elements("add", added))
	// Service chains before the endpoint chains they jump to.
	for _, s := range removed {
		fmt.Fprintf(&b, "delete chain %s %s\n", w.table(), nftSvcChain(s))
	}
	for ch := range had {
		if !want[ch] && strings.HasPrefix(ch, "endpoint-") {
			fmt.Fprintf(&b, "delete chain %s %s\n", w.table(), ch)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return proc.Nft(ns, b.String())
}

func (p nftablesProvider) Remove(st *lab.State, _ *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error {
		return proc.Nft(ns, proc.NftDropTable(nftWriter{f: f}.table()))
	})
}

// nftSvcChain names a service's chain (kube-proxy: service-HASH-ns/name/proto/port);
// the hash also covers the backends, so changing them switches chains.
func nftSvcChain(s Service) string {
	return nftName(fmt.Sprintf("service-%s-%s/%s/%d", chainHash(portName(s), s.Proto, backendsKey(s))[:8], s.VIP, s.Proto, s.Port))
}

func nftEndpointChain(s Service, b Backend) string {
	return nftName(fmt.Sprintf("endpoint-%s-%s/%s/%d__%s/%d", chainHash(portName(s), s.Proto, b.String())[:8], s.VIP, s.Proto, s.Port, b.IP, b.Port))
}

// nftName makes a chain name of text holding IPv6 addresses: nft takes no
// colon in a name, so they become dots (as kube-proxy's chain names do).
func nftName(text string) string { return strings.ReplaceAll(text, ":", ".") }

// nftChains: service-* per service, endpoint-* per backend.
var nftChains = chainNaming{service: nftSvcChain, backend: nftEndpointChain}

// nftWriter writes nft's flat command syntax (the form kube-proxy's
// knftables writes) for the table of one family.
type nftWriter struct {
	podCIDR string
	f       nfFamily
}

// table is the family's table as nft commands name it: "ip kube-proxy".
func (w nftWriter) table() string { return w.f.nft + " " + NftTable }

// base replaces the table with kube-proxy's fixed chains and the empty map.
func (w nftWriter) base() string {
	var b strings.Builder
	add := func(format string, args ...any) {
		b.WriteString("add ")
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	t := w.table()
	add("table %s", t)
	fmt.Fprintf(&b, "delete table %s\n", t)
	add("table %s { comment \"rules for kube-proxy (vnetlab)\" ; }", t)
	// dstnat is -100; nft 1.0.6 only accepts the keyword on prerouting.
	add("chain %s nat-prerouting { type nat hook prerouting priority dstnat ; }", t)
	add("chain %s nat-output { type nat hook output priority -100 ; }", t)
	add("chain %s nat-postrouting { type nat hook postrouting priority srcnat ; }", t)
	for _, ch := range []string{"services", "mark-for-masquerade", "masquerading"} {
		add("chain %s %s", t, ch)
	}
	add("rule %s nat-prerouting jump services", t)
	add("rule %s nat-output jump services", t)
	add("rule %s nat-postrouting jump masquerading", t)
	add("rule %s mark-for-masquerade mark set mark or %s", t, masqMark)
	add("rule %s masquerading mark and %s == 0 return", t, masqMark)
	add("rule %s masquerading mark set mark xor %s", t, masqMark)
	add("rule %s masquerading masquerade fully-random", t)
	add("map %s service-ips { type %s . inet_proto . inet_service : verdict ; comment \"ClusterIP traffic\" ; }", t, w.f.nftAddr)
	add("rule %s services %s daddr . meta l4proto . th dport vmap @service-ips", t, w.f.nft)
	return b.String()
}

// serviceChains writes the service and endpoint chains of some services,
// except endpoint chains already in the table (have).
func (w nftWriter) serviceChains(svcs []Service, have map[string]bool) string {
	var b bytes.Buffer
	b.Grow(len(svcs) * 600)
	t, ip := w.table(), w.f.nft
	for _, s := range svcs {
		sc := nftSvcChain(s)
		// Chains a rule jumps to must exist first: nft resolves names in order.
		for _, be := range s.Backends {
			ec := nftEndpointChain(s, be)
			if have[ec] {
				continue
			}
			fmt.Fprintf(&b, "add chain %s %s\n", t, ec)
			fmt.Fprintf(&b, "add rule %s %s %s saddr %s jump mark-for-masquerade\n", t, ec, ip, be.IP)
			fmt.Fprintf(&b, "add rule %s %s meta l4proto %s dnat to %s\n", t, ec, s.Proto, be)
		}
		fmt.Fprintf(&b, "add chain %s %s\n", t, sc)
		fmt.Fprintf(&b, "add rule %s %s %s daddr %s %s dport %d %s saddr != %s jump mark-for-masquerade\n", t, sc, ip, s.VIP, s.Proto, s.Port, ip, w.podCIDR)
		if len(s.Backends) == 1 {
			// kube-proxy skips the numgen map for one endpoint (kubernetes#140723):
			// every anonymous map makes later loads slower.
			fmt.Fprintf(&b, "add rule %s %s goto %s\n", t, sc, nftEndpointChain(s, s.Backends[0]))
			continue
		}
		fmt.Fprintf(&b, "add rule %s %s numgen random mod %d vmap {", t, sc, len(s.Backends))
		for i, be := range s.Backends {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %d : goto %s", i, nftEndpointChain(s, be))
		}
		b.WriteString(" }\n")
	}
	return b.String()
}

// elements adds ("add") or deletes ("delete") services' entries of the
// service-ips map, in batches so no single command grows huge.
func (w nftWriter) elements(verb string, svcs []Service) string {
	var b bytes.Buffer
	const batch = 1000
	for i := 0; i < len(svcs); i += batch {
		fmt.Fprintf(&b, "%s element %s service-ips {", verb, w.table())
		for j := i; j < i+batch && j < len(svcs); j++ {
			s := svcs[j]
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s . %s . %d", s.VIP, s.Proto, s.Port)
			if verb == "add" {
				fmt.Fprintf(&b, " : goto %s", nftSvcChain(s))
			}
		}
		b.WriteString(" }\n")
	}
	return b.String()
}
