package labpolicy

// The differential's packets: a probe is one real packet, the first of a
// new connection, crafted whole (an IPv4 or IPv6 header, then a TCP SYN, a
// UDP datagram or an SCTP INIT, checksums computed) and sent through a raw
// socket from the namespace of its source (a pod's, or the ext namespace
// for an address of no pod), so that any source address can be given. Each
// namespace has a packet socket on its interface; a probe was delivered
// when one of them received it (PACKET_OUTGOING is a sender's own copy).
// Each packet carries a tag (the world's number and the probe's index: TCP's
// sequence number, UDP's payload, SCTP's initiate tag and initial TSN), so
// a world's probes go out at once and a late packet of an earlier world is
// told apart; the RST a pod answers a TCP probe with acknowledges the tag,
// so it names its probe too.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// prober sends and catches probes in a lab's namespaces.
type prober struct {
	send map[netip.Addr]sender // a pod's namespace, by its addresses
	ext  sender                // every other source address
	// catch are the packet sockets, one per namespace.
	catch []int
	fds   []int // every socket, to close
	// pods are the pods' namespaces, to forget their neighbours
	// (forgetNeighbours) and whose addresses they keep.
	pods []*netlink.Handle
	keep map[netip.Addr]bool
}

// sender is a namespace's raw sockets: IPv4's and IPv6's.
type sender struct{ v4, v6 int }

// endpoint is a namespace of the lab, the interface its probes arrive on,
// and the source addresses it sends from (none: every address of no pod).
type endpoint struct {
	ns, ifname string
	addrs      []netip.Addr
}

// newProber opens the sockets in each endpoint's namespace.
func newProber(eps []endpoint) (*prober, error) {
	p := &prober{send: map[netip.Addr]sender{}, keep: map[netip.Addr]bool{}}
	for _, ep := range eps {
		if err := nsutil.Do(ep.ns, func() error { return p.open(ep) }); err != nil {
			p.close()
			return nil, fmt.Errorf("sockets in %s: %w", ep.ns, err)
		}
		if len(ep.addrs) == 0 {
			continue
		}
		h, err := nsutil.Handle(ep.ns)
		if err != nil {
			p.close()
			return nil, err
		}
		p.pods = append(p.pods, h)
		for _, a := range ep.addrs {
			p.keep[a] = true
		}
	}
	return p, nil
}

// forgetNeighbours deletes the pods' IPv4 neighbours that are no pod: the
// addresses of no pod inside the pods' subnet, which a pod resolves (the
// node answers by proxy ARP) for its probes to them and its replies to
// probes from them. The kernel's neighbour table is one for the whole
// machine (gc_thresh3, 1024 entries over every namespace): a few hundred
// worlds of them filled it ("neighbor table overflow"), and a packet to a
// new neighbour was dropped, in any namespace. It says how many it
// deleted.
func (p *prober) forgetNeighbours() (int, error) {
	n := 0
	for _, h := range p.pods {
		ns, err := h.NeighList(0, netlink.FAMILY_V4)
		if err != nil {
			return n, err
		}
		for _, e := range ns {
			a, ok := netip.AddrFromSlice(e.IP.To4())
			if !ok || p.keep[a] || e.State&netlink.NUD_PERMANENT != 0 {
				continue
			}
			if err := h.NeighDel(&e); err != nil && !errors.Is(err, unix.ENOENT) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// open opens ep's sockets, in its namespace.
func (p *prober) open(ep endpoint) error {
	var s sender
	var err error
	if s.v4, err = p.socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW); err != nil {
		return err
	}
	if s.v6, err = p.socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW); err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(ep.ifname)
	if err != nil {
		return err
	}
	c, err := p.socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return err
	}
	// Room for a whole world's probes between two reads.
	if err := unix.SetsockoptInt(c, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20); err != nil {
		return err
	}
	if err := unix.Bind(c, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return err
	}
	p.catch = append(p.catch, c)
	if len(ep.addrs) == 0 {
		p.ext = s
	}
	for _, a := range ep.addrs {
		p.send[a] = s
	}
	return nil
}

func (p *prober) socket(domain, typ, proto int) (int, error) {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	p.fds = append(p.fds, fd)
	return fd, nil
}

func (p *prober) close() {
	for _, fd := range p.fds {
		_ = unix.Close(fd)
	}
	for _, h := range p.pods {
		h.Close()
	}
	p.fds, p.pods = nil, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// quiet is how long nothing new must arrive, once as many probes arrived
// as the model allows, before a world's window closes early.
const quiet = 25 * time.Millisecond

// run sends world number gen's probes at once and says which arrived,
// and which were answered: a pod answers a TCP SYN (no socket listens)
// with a RST, which the node must pass back as the reply of an allowed
// connection. It reads until window has passed, or until at least expect
// probes and answers arrived and nothing new came for quiet.
func (p *prober) run(gen uint16, probes []netpoltest.Probe, expect int, window time.Duration) (got, answered []bool, err error) {
	if err := p.drain(func([]byte) {}); err != nil { // what an earlier world left
		return nil, nil, err
	}
	for i, pr := range probes {
		s, ok := p.send[pr.Src]
		if !ok {
			s = p.ext
		}
		if err := sendProbe(s, pr, tagOf(gen, i)); err != nil {
			return nil, nil, fmt.Errorf("sending %v: %w", pr, err)
		}
	}
	got, answered = make([]bool, len(probes)), make([]bool, len(probes))
	start := time.Now()
	n, last := 0, start
	pfds := make([]unix.PollFd, len(p.catch))
	for i, fd := range p.catch {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for {
		if _, err := unix.Poll(pfds, 5); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, nil, err
		}
		err := p.drain(func(pkt []byte) {
			tag, pr, reply, ok := parsePacket(pkt)
			i, seen := int(tag&0xffff), got
			if reply {
				seen = answered
			}
			if ok && uint16(tag>>16) == gen && i < len(probes) && probes[i] == pr && !seen[i] {
				seen[i] = true
				n++
				last = time.Now()
			}
		})
		if err != nil {
			return nil, nil, err
		}
		now := time.Now()
		if now.Sub(start) >= window || n >= expect && now.Sub(last) >= quiet && now.Sub(start) >= quiet {
			return got, answered, nil
		}
	}
}

// drain reads every packet the sockets hold, handing each received one
// (not a sender's own outgoing copy) to fn.
func (p *prober) drain(fn func([]byte)) error {
	buf := make([]byte, 2048)
	for _, fd := range p.catch {
		for {
			n, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				return err
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			fn(buf[:n])
		}
	}
	return nil
}

// tagOf is probe i of world gen's tag (never 0: gen starts at 1).
func tagOf(gen uint16, i int) uint32 { return uint32(gen)<<16 | uint32(i) }

const (
	ipHeader4 = 20
	ipHeader6 = 40
)

// sendProbe sends probe pr, tagged, through s; source port 0, a port no
// probe has as its destination, so no probe is an earlier one's reply.
func sendProbe(s sender, pr netpoltest.Probe, tag uint32) error {
	l4 := segment(pr, tag)
	var pkt []byte
	var fd int
	var to unix.Sockaddr
	if pr.Dst.Is4() {
		pkt = make([]byte, ipHeader4, ipHeader4+len(l4))
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(ipHeader4+len(l4)))
		pkt[8], pkt[9] = 64, pr.Proto.Number()
		copy(pkt[12:], pr.Src.AsSlice())
		copy(pkt[16:], pr.Dst.AsSlice()) // the kernel fills the checksum and id
		fd, to = s.v4, &unix.SockaddrInet4{Addr: pr.Dst.As4()}
	} else {
		pkt = make([]byte, ipHeader6, ipHeader6+len(l4))
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(len(l4)))
		pkt[6], pkt[7] = pr.Proto.Number(), 64
		copy(pkt[8:], pr.Src.AsSlice())
		copy(pkt[24:], pr.Dst.AsSlice())
		fd, to = s.v6, &unix.SockaddrInet6{Addr: pr.Dst.As16()}
	}
	pkt = append(pkt, l4...)
	for {
		err := unix.Sendto(fd, pkt, 0, to)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// segment is pr's layer 4 header (and UDP's payload), tagged.
func segment(pr netpoltest.Probe, tag uint32) []byte {
	var b []byte
	switch pr.Proto {
	case netpol.TCP:
		b = make([]byte, 20)
		binary.BigEndian.PutUint32(b[4:], tag) // sequence number
		b[12], b[13] = 5<<4, 0x02              // SYN
		binary.BigEndian.PutUint16(b[14:], 64240)
	case netpol.UDP:
		b = make([]byte, 12)
		binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
		binary.BigEndian.PutUint32(b[8:], tag)
	case netpol.SCTP:
		b = make([]byte, 32) // common header, INIT chunk
		b[12] = 1            // INIT
		binary.BigEndian.PutUint16(b[14:], 20)
		binary.BigEndian.PutUint32(b[16:], tag) // initiate tag
		binary.BigEndian.PutUint32(b[20:], 65535)
		binary.BigEndian.PutUint16(b[24:], 1)
		binary.BigEndian.PutUint16(b[26:], 1)
		binary.BigEndian.PutUint32(b[28:], tag) // initial TSN
	}
	binary.BigEndian.PutUint16(b[2:], pr.Port)
	switch pr.Proto {
	case netpol.TCP:
		binary.BigEndian.PutUint16(b[16:], checksum(pr, b))
	case netpol.UDP:
		binary.BigEndian.PutUint16(b[6:], checksum(pr, b))
	case netpol.SCTP:
		binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, castagnoli))
	}
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is TCP's or UDP's: over the pseudo-header and the segment.
func checksum(pr netpoltest.Probe, seg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(pr.Src.AsSlice())
	add(pr.Dst.AsSlice())
	sum += uint32(pr.Proto.Number()) + uint32(len(seg))
	add(seg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 && pr.Proto == netpol.UDP {
		c = 0xffff
	}
	return c
}

// parsePacket reads a received packet as one of the probes and its tag,
// or as a pod's RST answering a TCP probe (reply true: the tag, and the
// probe it answers); ok false: neither.
func parsePacket(pkt []byte) (tag uint32, pr netpoltest.Probe, reply, ok bool) {
	var l4 []byte
	var proto uint8
	switch {
	case len(pkt) >= ipHeader4 && pkt[0]>>4 == 4:
		hl := int(pkt[0]&0xf) * 4
		if len(pkt) < hl {
			return 0, pr, false, false
		}
		proto, l4 = pkt[9], pkt[hl:]
		pr.Src, pr.Dst = netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20]))
	case len(pkt) >= ipHeader6 && pkt[0]>>4 == 6:
		proto, l4 = pkt[6], pkt[ipHeader6:]
		pr.Src, pr.Dst = netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	default:
		return 0, pr, false, false
	}
	for _, p := range netpol.Protos {
		if p.Number() == proto {
			pr.Proto = p
		}
	}
	const rst = 0x04
	if pr.Proto == netpol.TCP && len(l4) >= 20 && l4[13]&rst != 0 {
		if binary.BigEndian.Uint16(l4[2:]) != 0 { // not to a probe's port 0
			return 0, pr, false, false
		}
		pr.Src, pr.Dst, pr.Port = pr.Dst, pr.Src, binary.BigEndian.Uint16(l4[0:])
		return binary.BigEndian.Uint32(l4[8:]) - 1, pr, true, true // the SYN's sequence number, acknowledged
	}
	at := map[netpol.Proto]int{netpol.TCP: 4, netpol.UDP: 8, netpol.SCTP: 16}[pr.Proto] // where the tag is
	if at == 0 || len(l4) < at+4 {
		return 0, pr, false, false
	}
	pr.Port = binary.BigEndian.Uint16(l4[2:])
	return binary.BigEndian.Uint32(l4[at:]), pr, false, true
}
