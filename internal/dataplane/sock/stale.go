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

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// EndStaleUDP destroys the connected UDP sockets these programs translated
// to a frontend of keep (a clusterIP, node IP or external IP and port)
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
		Prog *ebpf.Program `ebpf:"sock_terminate_udp"`
		Keep *ebpf.Map     `ebpf:"sock_keep"`
	}
	if err := p.spec.LoadAndAssign(&it, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: p.Dir()}}); err != nil {
		return 0, fmt.Errorf("sock: the UDP socket iterator (bpf_sock_destroy needs Linux 6.5 or newer): %w", err)
	}
	defer it.Prog.Close()
	defer it.Keep.Close()
	for fe, bs := range keep {
		if !fe.Addr().Is4() {
			continue
		}
		if err := it.Keep.Put(keepKey(fe, netip.AddrPort{}), uint8(1)); err != nil {
			return 0, fmt.Errorf("sock: sock_keep: %w", err)
		}
		for _, b := range bs {
			if err := it.Keep.Put(keepKey(fe, netip.AddrPortFrom(b.IP, b.Port)), uint8(1)); err != nil {
				return 0, fmt.Errorf("sock: sock_keep: %w", err)
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
			out, err := io.ReadAll(r)
			ended += len(out) / sockEndedLen
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

// sockEndedLen is bpf/sock.c's struct sock_ended, one per destroyed socket.
const sockEndedLen = 12

// keepKey is bpf/sock.c's struct sock_keep_key for frontend fe and backend
// be (the zero AddrPort: the frontend's own mark).
func keepKey(fe, be netip.AddrPort) []byte {
	k := make([]byte, 12)
	v := fe.Addr().As4()
	copy(k[0:4], v[:])
	if be.IsValid() {
		b := be.Addr().As4()
		copy(k[4:8], b[:])
		binary.BigEndian.PutUint16(k[10:12], be.Port())
	}
	binary.BigEndian.PutUint16(k[8:10], fe.Port())
	return k
}
