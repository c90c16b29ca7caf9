package tcbpf

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// OpenFamily on an IPv4 lab makes the IPv6 maps with one entry and keeps
// the others at their size; a dual lab's have their full size. Opened
// again with Open (which would make them full), the plane keeps the sizes
// it was made with, its programs load on them, an IPv4 Service is written
// and an IPv6 one is refused on the IPv4 plane (ErrIPv4Only).
func TestOpenFamilySizesIPv6Maps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
	spec, err := loadService()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range []family.Family{family.IPv4, family.Dual} {
		t.Run(string(fam), func(t *testing.T) {
			lab := fmt.Sprintf("pinsize%d%s", os.Getpid()%10000, fam)
			t.Cleanup(func() { _ = Remove(lab) })
			p, err := OpenFamily(lab, fam)
			if err != nil {
				t.Fatal(err)
			}
			p.Close()
			q, err := Open(lab)
			if err != nil {
				t.Fatalf("opened again: %v", err)
			}
			t.Cleanup(func() { q.Close() })
			for _, name := range ipv6Maps {
				m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(lab), name), nil)
				if err != nil {
					t.Fatal(err)
				}
				want := spec.Maps[name].MaxEntries
				if !fam.HasIPv6() {
					want = 1
				}
				if got := m.MaxEntries(); got != want {
					t.Errorf("%s: %d entries, want %d", name, got, want)
				}
				m.Close()
			}
			if got, want := q.objs.LbConntrack.MaxEntries(), spec.Maps[serviceMapLbConntrack].MaxEntries; got != want {
				t.Errorf("lb_conntrack: %d entries, want %d (an IPv4 map keeps its size)", got, want)
			}
			if q.HasIPv6() != fam.HasIPv6() {
				t.Errorf("HasIPv6: %v, want %v", q.HasIPv6(), fam.HasIPv6())
			}
			if _, err := q.programs(); err != nil {
				t.Fatalf("the programs on these maps: %v", err)
			}
			v4 := Service{VIP: netip.MustParseAddr("10.96.0.10"), Port: 53, Proto: UDP, Backends: []Backend{{IP: netip.MustParseAddr("10.244.1.2"), Port: 53}}}
			if err := q.AddService(v4); err != nil {
				t.Fatalf("IPv4 Service: %v", err)
			}
			v6 := Service{VIP: netip.MustParseAddr("fd00:10:96::a"), Port: 53, Proto: UDP, Backends: []Backend{{IP: netip.MustParseAddr("fd00:10:244:1::2"), Port: 53}}}
			err = q.AddService(v6)
			switch {
			case fam.HasIPv6() && err != nil:
				t.Errorf("IPv6 Service on a dual plane: %v", err)
			case !fam.HasIPv6() && !errors.Is(err, ErrIPv4Only):
				t.Errorf("IPv6 Service on an IPv4 plane: %v, want ErrIPv4Only", err)
			}
		})
	}
}
