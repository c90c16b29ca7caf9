// Package readiness is the pod side of pod network readiness: how long a new
// pod takes from its creation to its first packet on the pod network. A
// measured pod's container starts Hello (`vnetlab kube hello`), which sends
// the pod's name over UDP to a listener every interval until one datagram
// is answered; the listener (Listen, `vnetlab kube hello-listen`, in a pod
// that was Ready before) answers every datagram and stamps the first one of
// each name. The driver (internal/kube/bench) creates the pods and takes the
// stamps against its own clock, which on a local cluster is the same clock.
package readiness

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"time"
)

// Ack is the listener's answer to every datagram.
const Ack = "ok"

// Port is where the listener listens by default.
const Port = 7102

// MaxName is the longest name a datagram carries (a pod's name is at most 253).
const MaxName = 253

// Line is one line the listener writes: first Listening (its address, once
// it reads), then an Arrival for each name's first datagram.
type Line struct {
	Listening string `json:"listening,omitempty"`
	*Arrival
}

// Arrival is a name's first datagram: who sent it and when it was read.
type Arrival struct {
	Name string `json:"name"`
	From string `json:"from"`
	// AtNS is when the datagram was read, in nanoseconds since the Unix
	// epoch (the listener node's clock).
	AtNS int64 `json:"at_unix_ns"`
}

// Hello sends name to `to` every interval, each time from the same socket
// while it works and from a new one after an error (no route yet, an ICMP
// refusal), until a datagram is answered with Ack. It returns nil then, and
// ctx's error if ctx ends first.
func Hello(ctx context.Context, to netip.AddrPort, name string, every time.Duration) error {
	if len(name) == 0 || len(name) > MaxName {
		return errors.New("a name of 1 to 253 bytes is needed")
	}
	var conn *net.UDPConn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	buf := make([]byte, len(Ack)+1)
	for ctx.Err() == nil {
		if conn == nil {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
			if err != nil {
				sleep(ctx, every)
				continue
			}
			conn = c
		}
		if _, err := conn.Write([]byte(name)); err != nil {
			conn.Close()
			conn = nil
			sleep(ctx, every)
			continue
		}
		conn.SetReadDeadline(time.Now().Add(every))
		n, err := conn.Read(buf)
		switch {
		case err == nil && string(buf[:n]) == Ack:
			return nil
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			conn.Close()
			conn = nil
			sleep(ctx, every)
		}
	}
	return ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Listen answers every datagram on conn with Ack and calls first with each
// name's first one, stamped as it was read, until ctx ends (nil then) or
// conn fails. Datagrams longer than MaxName are answered and not named.
func Listen(ctx context.Context, conn net.PacketConn, first func(Arrival)) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	seen := map[string]bool{}
	buf := make([]byte, MaxName+1)
	for {
		n, from, err := conn.ReadFrom(buf)
		at := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		conn.WriteTo([]byte(Ack), from)
		if n == 0 || n > MaxName {
			continue
		}
		if name := string(buf[:n]); !seen[name] {
			seen[name] = true
			first(Arrival{Name: name, From: from.String(), AtNS: at.UnixNano()})
		}
	}
}
