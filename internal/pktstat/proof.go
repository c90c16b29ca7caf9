package pktstat

import (
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/nsutil"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Side is what one device carried over a cell's measured windows.
type Side struct {
	NS       string `json:"ns"`
	Link     string `json:"link"`
	Packets  uint64 `json:"packets"`
	Segments uint64 `json:"segments"` // each GSO/GRO packet counts its gso_segs
	// AvgBytes is the average packet as the device handled it (a GSO
	// packet whole at transmit; after GRO at receive), AvgSegment the
	// average on the wire (bytes over segments), MaxBytes the largest.
	AvgBytes   float64 `json:"avg_bytes"`
	AvgSegment float64 `json:"avg_segment_bytes"`
	MaxBytes   uint64  `json:"max_bytes"`
}

// Proof is the packets at the two ends of a cell's path: the device that
// transmitted most in the client's namespace (the sender: the data of a
// stream goes client to server) and the one that received most in the
// server's (after GRO).
type Proof struct {
	Sender   *Side `json:"sender_tx,omitempty"`
	Receiver *Side `json:"receiver_rx,omitempty"`
	// Note says what the averages mix: in one namespace (host) loopback
	// carries both directions, acknowledgements included.
	Note string `json:"note,omitempty"`
}

// SameNSNote is Proof.Note for a cell whose client and server share a
// namespace (the file's words: results.PacketsSameNS).
const SameNSNote = results.PacketsSameNS

// Prove picks the sender's and the receiver's device out of a cell's
// counts (nil when neither carried anything).
func Prove(s Snapshot, clientNS, serverNS string) *Proof {
	p := &Proof{Sender: busiest(s, clientNS, Tx), Receiver: busiest(s, serverNS, Rx)}
	if p.Sender == nil && p.Receiver == nil {
		return nil
	}
	if clientNS == serverNS {
		p.Note = SameNSNote
	} else if p.Sender != nil && (p.Receiver == nil || bytesOf(p.Receiver)*unseenShare < bytesOf(p.Sender)) {
		// The data arrived, yet not through the tracepoint in the server's
		// namespace: an average of the few packets that did would mislead.
		p.Receiver, p.Note = nil, UnseenNote
	}
	return p
}

// UnseenNote is Proof.Note when the server's namespace received far less
// than the client's sent: its device was entered without
// netif_receive_skb there (bpf_redirect_peer and macvlan's receive handler
// go another round in the stack, counted in the node's namespace instead).
// The file's words: results.PacketsUnseen, which readers compare with.
const UnseenNote = results.PacketsUnseen

// unseenShare: a receiver that counted under 1/unseenShare of the sender's
// bytes did not see the cell's data (a lossy UDP path still delivers more).
const unseenShare = 1000

func bytesOf(s *Side) float64 { return s.AvgBytes * float64(s.Packets) }

// busiest is the device of ns with the most bytes in direction d.
func busiest(s Snapshot, ns string, d Dir) *Side {
	ino, err := Inode(ns)
	if err != nil {
		return nil
	}
	var best Key
	var top Count
	for k, c := range s {
		if k.NetNS == ino && k.Dir == d && c.Bytes > top.Bytes {
			best, top = k, c
		}
	}
	if top.Packets == 0 {
		return nil
	}
	side := &Side{NS: ns, Link: linkName(ns, int(best.Ifindex)), Packets: top.Packets, Segments: top.Segs,
		AvgBytes: float64(top.Bytes) / float64(top.Packets), MaxBytes: top.Max}
	if top.Segs > 0 {
		side.AvgSegment = float64(top.Bytes) / float64(top.Segs)
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
