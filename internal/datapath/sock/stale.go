package sock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// EndStaleUDP destroys the connected UDP sockets these programs translated
// to a frontend of keep (a clusterIP, node IP or external IP and port, of
// either family)
// whose backend is not in keep[frontend], in each network namespace of
// namespaces (paths such as /proc/PID/ns/net; "" is the caller's own).
// Such a socket talks to its backend's own address and would keep a
// deleted pod's forever; destroyed (bpf_sock_destroy, kernel 6.5 or
// later: bpf/sock.c's sock_terminate_udp), its application gets
// ECONNABORTED and connects again, to a live backend, which is as near as
// a socket comes to kube-proxy moving the flow. Unconnected UDP sockets
// need nothing (each datagram picks again), TCP is left as kube-proxy
// leaves it. It returns how many sockets were destroyed.
func (p *Plane) EndStaleUDP(keep map[netip.AddrPort][]tcbpf.Backend, namespaces []string) (int, error) {
	if len(keep) == 0 || len(namespaces) == 0 {
		return 0, nil
	}
	p.iterMu.Lock()
	defer p.iterMu.Unlock()
	it, err := p.udpIterator()
	if err != nil {
		return 0, err
	}
	// What the walk keeps goes into the keep maps, and out again after it:
	// the next walk is asked about other frontends and backends. A map
	// that could not be emptied is dropped with its program (the next walk
	// loads both again).
	put, err := it.fill(keep)
	defer func() {
		if cerr := it.clear(put); cerr != nil {
			it.Close()
			p.iter = nil
		}
	}()
	if err != nil {
		return 0, err
	}
	var ended int
	var errs []error
	for _, ns := range namespaces {
		// The iterator walks the sockets of the namespace that opens it.
		walk := func() error {
			r, err := it.link.Open()
			if err != nil {
				return err
			}
			defer r.Close()
			out, err := io.ReadAll(r) // a byte per destroyed socket
			ended += len(out)
			return err
		}
		if ns == "" {
			err = walk()
		} else {
			err = nsutil.DoPath(ns, walk)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) { // a pod gone meanwhile: nothing to end
			errs = append(errs, fmt.Errorf("sock: UDP sockets of %s: %w", ns, err))
		}
	}
	return ended, errors.Join(errs...)
}

// udpIter is the UDP socket iterator (sock_terminate_udp) with its keep
// maps, loaded once per Plane and attached once: a load is a verifier run
// and a parse of the kernel's BTF (bpf_sock_destroy is a kfunc); loaded at
// every cleanup, it was 18% of the proxies' CPU during kube converge's
// changes.
type udpIter struct {
	iterObjects
	link *link.Iter
}

// iterObjects are what the iterator's load gives (the Service maps it
// reads come from the plane's pins).
type iterObjects struct {
	Prog  *ebpf.Program `ebpf:"sock_terminate_udp"`
	Keep  *ebpf.Map     `ebpf:"sock_keep"`
	Keep6 *ebpf.Map     `ebpf:"sock6_keep"`
}

// udpIterator is p's iterator, loaded and attached when first needed
// (iterMu held).
func (p *Plane) udpIterator() (*udpIter, error) {
	if p.iter != nil {
		return p.iter, nil
	}
	it := &udpIter{}
	if err := p.spec.LoadAndAssign(&it.iterObjects, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: p.Dir()}}); err != nil {
		return nil, fmt.Errorf("sock: the UDP socket iterator (bpf_sock_destroy needs Linux 6.5 or newer): %w", err)
	}
	l, err := link.AttachIter(link.IterOptions{Program: it.Prog})
	if err != nil {
		it.Close()
		return nil, fmt.Errorf("sock: attach the UDP socket iterator: %w", err)
	}
	it.link, p.iter = l, it
	return it, nil
}

// keyIn is a key of one of the keep maps.
type keyIn struct {
	m   *ebpf.Map
	key []byte
}

// fill writes keep into the keep maps: each frontend's mark, and each
// backend it keeps. It returns the keys written, also on an error.
func (it *udpIter) fill(keep map[netip.AddrPort][]tcbpf.Backend) ([]keyIn, error) {
	var put []keyIn
	for fe, bs := range keep {
		m := it.Keep
		if fe.Addr().Is6() {
			m = it.Keep6
		}
		keys := [][]byte{keepKey(fe, netip.AddrPort{})}
		for _, b := range bs {
			keys = append(keys, keepKey(fe, netip.AddrPortFrom(b.IP, b.Port)))
		}
		for _, k := range keys {
			if err := m.Put(k, uint8(1)); err != nil {
				return put, fmt.Errorf("sock: %s: %w", m, err)
			}
			put = append(put, keyIn{m, k})
		}
	}
	return put, nil
}

// clear deletes the keys fill wrote.
func (it *udpIter) clear(put []keyIn) error {
	var errs []error
	for _, k := range put {
		if err := k.m.Delete(k.key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close releases the iterator's link, program and maps.
func (it *udpIter) Close() error {
	var errs []error
	if it.link != nil {
		errs = append(errs, it.link.Close())
	}
	return errors.Join(append(errs, it.Prog.Close(), it.Keep.Close(), it.Keep6.Close())...)
}

// keepKey is bpf/sock.c's struct sock_keep_key (IPv4) or sock6_keep_key
// (IPv6) for frontend fe and backend be (the zero AddrPort: the frontend's
// own mark).
func keepKey(fe, be netip.AddrPort) []byte {
	n := 4
	if fe.Addr().Is6() {
		n = 16
	}
	k := make([]byte, 2*n+4)
	copy(k[0:n], fe.Addr().AsSlice())
	binary.BigEndian.PutUint16(k[2*n:], fe.Port())
	if be.IsValid() {
		copy(k[n:2*n], be.Addr().AsSlice())
		binary.BigEndian.PutUint16(k[2*n+2:], be.Port())
	}
	return k
}
