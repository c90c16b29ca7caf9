package runner

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/pktstat"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Every lab run counts the packets of its labs' devices (internal/measure/pktstat),
// --profile or not, in each cell's proof sample (rounds.go), never in a
// measured one: each cell records the average packet at the sender's
// transmit and at the receiver's GRO, the proof that an MTU, GSO/GRO or
// offload knob took effect, with the same traffic and settings as its
// measured samples.

// openPackets loads the counter, detached, watching the cells' own
// namespaces (Planned.NetNS: a lab's); nil when no cell has any (a
// cluster's cells) or this kernel cannot count (a note says why): then
// there is no proof round and the cells have no packet proof.
func openPackets(cells []Planned, prog Progress) *pktstat.Counter {
	var ns []string
	seen := map[string]bool{}
	for _, c := range cells {
		for _, n := range c.NetNS {
			if !seen[n] {
				seen[n] = true
				ns = append(ns, n)
			}
		}
	}
	if len(ns) == 0 {
		return nil
	}
	c, err := pktstat.Open()
	if err == nil {
		if err = c.Watch(ns...); err != nil {
			c.Close()
		}
	}
	if err != nil {
		prog.Note("warning: packet sizes not recorded: %v", err)
		return nil
	}
	return c
}

// packetWindow counts the packets of one proof sample's window: the
// counter is attached at its start and detached at its end.
type packetWindow struct {
	c            *pktstat.Counter
	start, delta pktstat.Snapshot
	err          error
}

func (w *packetWindow) Start() {
	if w.err = w.c.Attach(); w.err == nil {
		w.start, w.err = w.c.Snapshot()
	}
}

func (w *packetWindow) End() {
	defer w.c.Detach()
	if w.start == nil {
		return
	}
	end, err := w.c.Snapshot()
	if err != nil {
		w.err = err
		return
	}
	w.delta = end.Sub(w.start)
}

// prove writes cell c's packet proof from its proof sample's counts, and
// marks the cell "not applied" when they show its knob ignored.
func (s Spec) prove(c Planned, counts pktstat.Snapshot) {
	c.Cell.Packets = packetsOf(pktstat.Prove(counts, c.Target.ClientNS, c.Target.ServerNS))
	if why := s.at(c.Point).ignored(c.Cell); why != "" {
		c.Cell.NotApplied = why
	}
}

// ignored says why a cell's knob, accepted by the kernel, was not in force
// in its packets ("": nothing shows it). BIG TCP: a TCP stream whose
// sender never sent a packet above 64 KB did not use it (the settings of
// every link read back as asked, yet the socket kept the legacy size).
func (s Spec) ignored(c *results.Cell) string {
	gso := knob.Int(s.Lab.Get(knob.GSO))
	if gso <= knob.LegacyGSO || c.Test != string(engine.TCPStream) || c.Packets == nil || c.Packets.Sender == nil {
		return ""
	}
	if max := c.Packets.Sender.MaxBytes; max <= knob.LegacyGSO+bigPacketHeaders {
		return fmt.Sprintf("gso %d ignored: the sender's largest packet was %d bytes, none above 64 KB (BIG TCP not in force)", gso, max)
	}
	return ""
}

// bigPacketHeaders: a legacy GSO packet's headers (Ethernet, IP, TCP with
// options) on top of its 64 KB of payload are under this.
const bigPacketHeaders = 128
