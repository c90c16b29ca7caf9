package kernel

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// bigTCPProbeSize is above 64 KB, as BIG TCP packets are.
const bigTCPProbeSize = 131072

var (
	bigTCPOnce sync.Once
	bigTCPErr  error
)

// BigTCPIPv4 says whether links take a gso_ipv4_max_size above 64 KB (BIG
// TCP for IPv4, Linux 6.3+): probed on a veth in a throwaway namespace,
// set and read back (a kernel without the attribute ignores it).
func BigTCPIPv4() error {
	bigTCPOnce.Do(func() { bigTCPErr = probeBigTCP() })
	return bigTCPErr
}

func probeBigTCP() error {
	return nsutil.Scratch(func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vnlbig0"}, PeerName: "vnlbig1"}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("probe veth: %w", err)
		}
		if err := netlink.LinkSetGSOIPv4MaxSize(v, bigTCPProbeSize); err != nil {
			return fmt.Errorf("gso_ipv4_max_size %d refused: %w (BIG TCP for IPv4 needs Linux 6.3+)", bigTCPProbeSize, err)
		}
		l, err := netlink.LinkByName(v.Name)
		if err != nil {
			return err
		}
		if got := l.Attrs().GSOIPv4MaxSize; got != bigTCPProbeSize {
			return errors.New("gso_ipv4_max_size is not kept (BIG TCP for IPv4 needs Linux 6.3+)")
		}
		return nil
	})
}
