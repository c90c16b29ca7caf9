package tapswitch

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

// FirstFD is where the TAP descriptors start in the switch process: the
// starter passes them as extra files, in the order of the port names.
const FirstFD = 3

// Main runs the switch over descriptors FirstFD.. named by names, until
// SIGTERM (then it logs per-port counters and exits 0) or a port fails.
// vnetHdr > 0 means the TAPs were opened with IFF_VNET_HDR (offload mode).
func Main(names []string, vnetHdr int) error {
	if len(names) < 2 {
		return fmt.Errorf("tap-switch needs at least two --port names (one per descriptor from %d)", FirstFD)
	}
	s := &Switch{VnetHdr: vnetHdr, Buf: NaiveFrame}
	if vnetHdr > 0 {
		s.Buf = vnetHdr + OffloadFrame
	}
	for i, n := range names {
		fd := FirstFD + i
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return fmt.Errorf("port %s: descriptor %d is not open: tap-switch is started by `vnetlab up` with the TAPs open", n, fd)
		}
		s.Ports = append(s.Ports, &Port{Name: n, FD: fd})
	}
	log.Printf("tap-switch: %d ports %v, vnet_hdr %d, buffer %d bytes", len(names), names, vnetHdr, s.Buf)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	select {
	case sig := <-term:
		log.Printf("tap-switch: %v: %s", sig, s.Stats())
		return nil
	case err := <-done:
		log.Printf("tap-switch: %v: %s", err, s.Stats())
		return err
	}
}
