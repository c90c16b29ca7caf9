package sock

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// OpenFamily on an IPv4 lab makes the socket programs' own IPv6 maps with
// one entry, as the tc plane's (tcbpf.SizeMaps); opened again with Open
// the plane keeps them, and its programs and its UDP socket iterator load
// on them.
func TestOpenFamilyIPv4(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
	lab := fmt.Sprintf("sockfam%d", os.Getpid()%10000)
	t.Cleanup(func() { _ = tcbpf.Remove(lab) })
	p, err := OpenFamily(lab, family.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	q, err := Open(lab)
	if err != nil {
		t.Fatalf("opened again: %v", err)
	}
	defer q.Close()
	for _, name := range []string{sockMapSock6Conns, sockMapSock6Rev, sockMapSock6Affinity} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(q.Dir(), name), nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.MaxEntries() != 1 {
			t.Errorf("%s: %d entries, want 1", name, m.MaxEntries())
		}
		m.Close()
	}
	if q.objs.SockConns.MaxEntries() <= 1 {
		t.Errorf("sock_conns: %d entries: an IPv4 map keeps its size", q.objs.SockConns.MaxEntries())
	}
	vip := netip.MustParseAddrPort("10.96.0.10:53")
	if _, err := q.EndStaleUDP(map[netip.AddrPort][]tcbpf.Backend{vip: nil}, []string{""}); err != nil {
		t.Errorf("the UDP socket iterator: %v", err)
	}
}
