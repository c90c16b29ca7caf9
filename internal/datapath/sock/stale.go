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
	var it struct {
		Prog  *ebpf.Program `ebpf:"sock_terminate_udp"`
		Keep  *ebpf.Map     `ebpf:"sock_keep"`
		Keep6 *ebpf.Map     `ebpf:"sock6_keep"`
	}
	if err := p.spec.LoadAndAssign(&it, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: p.Dir()}}); err != nil {
		return 0, fmt.Errorf("sock: the UDP socket iterator (bpf_sock_destroy needs Linux 6.5 or newer): %w", err)
	}
	defer it.Prog.Close()
	defer it.Keep.Close()
	defer it.Keep6.Close()
	for fe, bs := range keep {
		m := it.Keep
		if fe.Addr().Is6() {
			m = it.Keep6
		}
		if err := m.Put(keepKey(fe, netip.AddrPort{}), uint8(1)); err != nil {
			return 0, fmt.Errorf("sock: %s: %w", m, err)
		}
		for _, b := range bs {
			if err := m.Put(keepKey(fe, netip.AddrPortFrom(b.IP, b.Port)), uint8(1)); err != nil {
				return 0, fmt.Errorf("sock: %s: %w", m, err)
			}
		}
	}
	iter, err := link.AttachIter(link.IterOptions{Program: it.Prog})
	if err != nil {
		return 0, fmt.Errorf("sock: attach the UDP socket iterator: %w", err)
	}
	defer iter.Close()
	var ended int
	var errs []error
	for _, ns := range namespaces {
		// The iterator walks the sockets of the namespace that opens it.
		walk := func() error {
			r, err := iter.Open()
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
