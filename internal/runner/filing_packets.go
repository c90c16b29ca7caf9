package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/pktstat"
	"github.com/vnetlab/vnetlab/internal/results"
)

// packetsOf is a cell's packet proof as the file records it (nil: the
// counter saw nothing).
func packetsOf(p *pktstat.Proof) *results.Packets {
	if p == nil {
		return nil
	}
	return &results.Packets{Sender: packetSideOf(p.Sender), Receiver: packetSideOf(p.Receiver), Note: packetNotes[p.Note]}
}

// packetSideOf is one end's count as the file records it.
func packetSideOf(s *pktstat.Side) *results.PacketSide {
	if s == nil {
		return nil
	}
	out := results.PacketSide(*s)
	return &out
}

// packetNotes are the file's words for the counter's notes (Plain: none).
var packetNotes = map[pktstat.Note]string{
	pktstat.SameNS: results.PacketsSameNS,
	pktstat.Unseen: results.PacketsUnseen,
}
