package ebpf_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	dp "github.com/vnetlab/vnetlab/internal/dataplane/ebpf"
)

// UpdateService keeps the Service's id (its flows keep their backends),
// rewrites the backends growing and shrinking, and keeps the backend-port
// prefilter counting exactly the backends present.
func TestUpdateServiceInPlace(t *testing.T) {
	p := testPlane(t)
	be := func(ip string, port uint16) dp.Backend { return dp.Backend{IP: netip.MustParseAddr(ip), Port: port} }
	vip := netip.MustParseAddr("10.96.0.7")
	s := dp.Service{VIP: vip, Port: 80, Proto: dp.TCP, Backends: []dp.Backend{be("10.244.1.5", 8080)}}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	id := func() uint32 {
		ss, err := p.ListServices()
		if err != nil || len(ss) != 1 {
			t.Fatalf("services %v, %v", ss, err)
		}
		return ss[0].ID
	}
	first := id()
	port := func(n uint32) uint32 {
		var v uint32
		if err := p.Objects().LbBports.Lookup(n, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, bs := range [][]dp.Backend{
		{be("10.244.1.5", 8080), be("10.244.2.5", 8080), be("10.244.2.6", 9090)},
		{be("10.244.2.6", 9090)},
		nil,
		{be("10.244.1.9", 8080)},
	} {
		s.Backends = bs
		if err := p.UpdateService(s); err != nil {
			t.Fatal(err)
		}
		ss, _ := p.ListServices()
		if got := ss[0].Backends; !reflect.DeepEqual(got, bs) && !(len(got) == 0 && len(bs) == 0) {
			t.Fatalf("backends %v, want %v", got, bs)
		}
		if id() != first {
			t.Fatalf("id changed from %d to %d", first, id())
		}
		var n8080, n9090 uint32
		for _, b := range bs {
			if b.Port == 8080 {
				n8080++
			} else {
				n9090++
			}
		}
		if port(8080) != n8080 || port(9090) != n9090 {
			t.Errorf("prefilter 8080=%d 9090=%d, want %d %d", port(8080), port(9090), n8080, n9090)
		}
	}
	missing := dp.Service{VIP: vip, Port: 81, Proto: dp.TCP}
	if err := p.UpdateService(missing); !errors.Is(err, dp.ErrNotFound) {
		t.Errorf("update of a missing Service: %v, want ErrNotFound", err)
	}
}
