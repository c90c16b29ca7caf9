// Package testnet holds what tests of the data paths share: small TCP/UDP
// servers started inside a lab's namespaces.
package testnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Server is a TCP and UDP server on one port in a namespace, until the test ends.
type Server struct {
	Accepts atomic.Int64 // TCP connections accepted
}

// Serve starts TCP and UDP servers on port inside namespace ns (a socket
// belongs to the namespace it was created in, whichever thread uses it later).
// With a name, each TCP connection's first line and each datagram is
// answered "<name> <peer address>" (which backend answered, and whom it saw);
// with name "" they echo what they get.
func Serve(t *testing.T, ns string, port int, name string) *Server {
	t.Helper()
	return serve(t, ns, port, name, "4")
}

// Serve6 is Serve over IPv6 (tcp6 and udp6 sockets).
func Serve6(t *testing.T, ns string, port int, name string) *Server {
	t.Helper()
	return serve(t, ns, port, name, "6")
}

// serve is Serve on the tcp/udp networks of family ("4" or "6").
func serve(t *testing.T, ns string, port int, name, family string) *Server {
	t.Helper()
	var (
		ln net.Listener
		pc net.PacketConn
	)
	err := nsutil.Do(ns, func() error {
		var err error
		if ln, err = net.Listen("tcp"+family, fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp"+family, fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	s := &Server{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Accepts.Add(1)
			go func() {
				defer c.Close()
				if name == "" {
					_, _ = io.Copy(c, c)
					return
				}
				r := bufio.NewReader(c)
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
				_, _ = io.Copy(io.Discard, r) // a stream, until the client stops
			}()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			reply := buf[:n]
			if name != "" {
				reply = []byte(fmt.Sprintf("%s %s\n", name, from))
			}
			_, _ = pc.WriteTo(reply, from)
		}
	}()
	return s
}
