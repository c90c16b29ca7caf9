package lab

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// ParseRate reads a tc-style rate ("10gbit", "500mbit", "100kbit", "1e9")
// and returns bits per second.
func ParseRate(s string) (uint64, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("underlay rate %q: want a tc-style rate such as 10gbit or 500mbit", s)
	}
	return uint64(f * mult), nil
}

// shape puts a tbf qdisc on a link: rate as given, a burst large enough for
// 64 KB GSO packets, and a queue of about 5 ms.
func shape(h *netlink.Handle, ifname, rate string) error {
	bps, err := ParseRate(rate)
	if err != nil {
		return err
	}
	l, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	bytesPerSec := bps / 8
	burst := bytesPerSec / 1000 // 1 ms worth
	if burst < 256<<10 {
		burst = 256 << 10
	}
	limit := burst + bytesPerSec/200 // + 5 ms of queue
	// tbf's buffer is the burst expressed as transmit time in psched ticks (64 ns).
	bufferTicks := uint32(float64(burst) / float64(bytesPerSec) * 1e9 / 64)
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       bytesPerSec,
		Limit:      uint32(limit),
		Buffer:     bufferTicks,
	}
	if err := h.QdiscAdd(q); err != nil {
		return fmt.Errorf("tbf %s on %s: %w", rate, ifname, err)
	}
	return nil
}
