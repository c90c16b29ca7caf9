package pktstat

import (
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// A cell's proof is the file's own type, results.Packets (as the
// profiler's summary is results.Profile): the packets at the two ends of
// its path, the device that transmitted most in the client's namespace
// (the sender: the data of a stream goes client to server) and the one
// that received most in the server's (after GRO).

// Prove picks the sender's and the receiver's device out of a cell's
// counts (nil when neither carried anything).
func Prove(s Snapshot, clientNS, serverNS string) *results.Packets {
	return prove(busiest(s, clientNS, Tx), busiest(s, serverNS, Rx), clientNS == serverNS)
}

// prove is Prove's verdict on the two devices picked.
func prove(sender, receiver *results.PacketSide, sameNS bool) *results.Packets {
	p := &results.Packets{Sender: sender, Receiver: receiver}
	if p.Sender == nil && p.Receiver == nil {
		return nil
	}
	if sameNS {
		p.Note = results.PacketsSameNS
	} else if p.Sender != nil && (p.Receiver == nil || bytesOf(p.Receiver)*unseenShare < bytesOf(p.Sender)) {
		// The data arrived, yet not through the tracepoint in the server's
		// namespace: an average of the few packets that did would mislead.
		p.Receiver, p.Note = nil, results.PacketsUnseen
	}
	return p
}

// unseenShare: a receiver that counted under 1/unseenShare of the sender's
// bytes did not see the cell's data (a lossy UDP path still delivers more):
// its device was entered without netif_receive_skb in the server's
// namespace (bpf_redirect_peer and macvlan's receive handler go another
// round in the stack, counted in the node's namespace instead), and the
// proof says so (results.PacketsUnseen).
const unseenShare = 1000

func bytesOf(s *results.PacketSide) float64 { return s.AvgBytes * float64(s.Packets) }

// busiest is the device of ns with the most bytes in direction d.
func busiest(s Snapshot, ns string, d Dir) *results.PacketSide {
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
func sideOf(ns, link string, c Count) *results.PacketSide {
	side := &results.PacketSide{NS: ns, Link: link, Packets: c.Packets, Segments: c.Segs,
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
