package runner

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/knob"
	"github.com/vnetlab/vnetlab/internal/pktstat"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Every lab run counts the packets of its labs' devices (internal/pktstat),
// --profile or not: each cell records the average packet at the sender's
// transmit and at the receiver's GRO over its valid samples' measured
// windows, the proof that an MTU, GSO/GRO or offload knob took effect.

// openPackets starts counting in the labs' namespaces; nil (and a note)
// when this kernel cannot: the cells then have no packet proof.
func openPackets(p *plan) *pktstat.Counter {
	c, err := pktstat.Open()
	if err != nil {
		p.prog.Note("warning: packet sizes not recorded: %v", err)
		return nil
	}
	for _, l := range p.labs {
		if err := c.Watch(labNamespaces(l)...); err != nil {
			c.Close()
			p.prog.Note("warning: packet sizes not recorded: %v", err)
			return nil
		}
	}
	return c
}

// packetWindow takes the counts at a measured window's start and end.
type packetWindow struct {
	c            *pktstat.Counter
	start, delta pktstat.Snapshot
}

func (w *packetWindow) Start() {
	w.start, _ = w.c.Snapshot()
}

func (w *packetWindow) End() {
	if end, err := w.c.Snapshot(); err == nil && w.start != nil {
		w.delta = end.Sub(w.start)
	}
}

// packetTotals sums each cell's valid samples' windows.
type packetTotals map[*results.Cell]pktstat.Snapshot

func (t packetTotals) add(c *results.Cell, d pktstat.Snapshot) {
	if d == nil {
		return
	}
	if t[c] == nil {
		t[c] = pktstat.Snapshot{}
	}
	t[c].Add(d)
}

// prove writes each cell's packet proof, and marks a cell whose knob the
// packets show ignored (checkInForce).
func (t packetTotals) prove(cells []Planned, spec Spec) {
	for _, pc := range cells {
		c := pc.Cell
		if s := t[c]; s != nil {
			c.Packets = pktstat.Prove(s, pc.Target.ClientNS, pc.Target.ServerNS)
		}
		if why := spec.at(pointOf(c.ID())).ignored(c); why != "" {
			c.NotApplied = why
		}
	}
}

// ignored says why a cell's knob, accepted by the kernel, was not in force
// in its packets ("": nothing shows it). BIG TCP: a TCP stream whose
// sender never sent a packet above 64 KB did not use it (the settings of
// every link read back as asked, yet the socket kept the legacy size).
func (s Spec) ignored(c *results.Cell) string {
	if s.Links.GSO <= knob.LegacyGSO || c.Test != string(engine.TCPStream) || c.Packets == nil || c.Packets.Sender == nil {
		return ""
	}
	if max := c.Packets.Sender.MaxBytes; max <= knob.LegacyGSO+bigPacketHeaders {
		return fmt.Sprintf("gso %d ignored: the sender's largest packet was %d bytes, none above 64 KB (BIG TCP not in force)", s.Links.GSO, max)
	}
	return ""
}

// bigPacketHeaders: a legacy GSO packet's headers (Ethernet, IP, TCP with
// options) on top of its 64 KB of payload are under this.
const bigPacketHeaders = 128
