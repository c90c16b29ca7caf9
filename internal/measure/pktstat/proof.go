package pktstat

import (
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// A cell's proof: the packets at the two ends of its path, the device
// that transmitted most in the client's namespace (the sender: the data of
// a stream goes client to server) and the one that received most in the
// server's (after GRO). The runner converts it into the results file's
// type (internal/runner/filing_packets.go).

// Proof is what the counter saw at the two ends of a cell's path.
type Proof struct {
	Sender, Receiver *Side // nil: that end counted nothing (or, Unseen, not the data)
	Note             Note  // what the averages mix, or why the receiver is absent
}

// Side is one device's count at an end of the path.
type Side struct {
	NS       string
	Link     string
	Packets  uint64
	Segments uint64 // each GSO/GRO packet counts its gso_segs
	// AvgBytes is the average packet as the device handled it (a GSO
	// packet whole at transmit; after GRO at receive), AvgSegment the
	// average on the wire (bytes over segments), MaxBytes the largest.
	AvgBytes   float64
	AvgSegment float64
	MaxBytes   uint64
}

// Note is what a proof's averages mix, or why its receiver is absent.
type Note int

const (
	// Plain: two namespaces, the receiver saw the data.
	Plain Note = iota
	// SameNS: client and server share a namespace (host mode): its
	// loopback carries both directions, so the averages include the
	// acknowledgements.
	SameNS
	// Unseen: the server's namespace received far less than the client's
	// sent (its device was entered without netif_receive_skb there), so
	// the receiver's average is not given.
	Unseen
)

// Prove picks the sender's and the receiver's device out of a cell's
// counts (nil when neither carried anything).
func Prove(s Snapshot, clientNS, serverNS string) *Proof {
	return prove(busiest(s, clientNS, Tx), busiest(s, serverNS, Rx), clientNS == serverNS)
}

// prove is Prove's verdict on the two devices picked.
func prove(sender, receiver *Side, sameNS bool) *Proof {
	p := &Proof{Sender: sender, Receiver: receiver}
	if p.Sender == nil && p.Receiver == nil {
		return nil
	}
	if sameNS {
		p.Note = SameNS
	} else if p.Sender != nil && (p.Receiver == nil || bytesOf(p.Receiver)*unseenShare < bytesOf(p.Sender)) {
		// The data arrived, yet not through the tracepoint in the server's
		// namespace: an average of the few packets that did would mislead.
		p.Receiver, p.Note = nil, Unseen
	}
	return p
}

// unseenShare: a receiver that counted under 1/unseenShare of the sender's
// bytes did not see the cell's data (a lossy UDP path still delivers more):
// its device was entered without netif_receive_skb in the server's
// namespace (bpf_redirect_peer and macvlan's receive handler go another
// round in the stack, counted in the node's namespace instead), and the
// proof says so (Unseen).
const unseenShare = 1000

func bytesOf(s *Side) float64 { return s.AvgBytes * float64(s.Packets) }

// busiest is the device of ns with the most bytes in direction d.
func busiest(s Snapshot, ns string, d Dir) *Side {
	ino, err := Inode(ns)
	if err != nil {
		return nil
	}
	best, top := busiestOf(s, ino, d)
	if top.Packets == 0 {
		return nil
	}
	return sideOf(ns, linkName(ns, int(best.Ifindex)), top)
}

// busiestOf is the key of namespace ino and direction d with the most
// bytes, and its count (zero when none has any).
func busiestOf(s Snapshot, ino uint32, d Dir) (Key, Count) {
	var best Key
	var top Count
	for k, c := range s {
		if k.NetNS == ino && k.Dir == d && (c.Bytes > top.Bytes || c.Bytes == top.Bytes && c.Bytes > 0 && less(k, best)) {
			best, top = k, c
		}
	}
	return best, top
}

// less orders keys (a tie of bytes goes to the lower ifindex: the same
// device whatever the map's order).
func less(a, b Key) bool {
	if a.Ifindex != b.Ifindex {
		return a.Ifindex < b.Ifindex
	}
	return a.Dir < b.Dir
}

// sideOf is a device's side of the proof from its count (Packets > 0).
func sideOf(ns, link string, c Count) *Side {
	side := &Side{NS: ns, Link: link, Packets: c.Packets, Segments: c.Segs,
		AvgBytes: float64(c.Bytes) / float64(c.Packets), MaxBytes: c.Max}
	if c.Segs > 0 {
		side.AvgSegment = float64(c.Bytes) / float64(c.Segs)
	}
	return side
}

// linkName names ifindex in ns ("" when it is gone).
func linkName(ns string, ifindex int) string {
	name := ""
	_ = nsutil.Do(ns, func() error {
		l, err := netlink.LinkByIndex(ifindex)
		if err == nil {
			name = l.Attrs().Name
		}
		return err
	})
	return name
}
