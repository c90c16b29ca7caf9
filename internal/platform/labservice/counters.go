package labservice

import (
	"errors"
	"fmt"

	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Counters are a lab's eBPF programs' counters (vnetlab svc stats), read
// from their pinned maps without loading anything: the tc programs'
// (Service translation per family, host routing) and, when the lab has
// them, the socket programs'.
type Counters struct {
	Lab    string         `json:"lab"`
	TC     tcbpf.Counters `json:"tc"`
	Socket *sock.Stats    `json:"socket,omitempty"`
}

// ReadCounters reads lab's counters; a lab without vnetlab's eBPF programs
// (a netfilter provider on a mode without programs) is an error naming how
// to get them.
func ReadCounters(lab string) (Counters, error) {
	c := Counters{Lab: lab}
	var err error
	if c.TC, err = tcbpf.ReadCounters(lab); errors.Is(err, tcbpf.ErrNoPrograms) {
		return c, fmt.Errorf("lab %s has no eBPF programs, so no counters: they come with --provider ebpf or ebpf-sock, or a mode whose name ends in -ebpf", lab)
	} else if err != nil {
		return c, err
	}
	c.Socket, err = sock.ReadStats(lab)
	return c, err
}
