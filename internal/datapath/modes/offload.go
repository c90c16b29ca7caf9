package modes

import (
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// SetTxChecksum is `ethtool -K IFNAME tx on|off` inside namespace ns. With it
// off the stack computes checksums itself and, since TSO needs checksum
// offload, stops sending 64 KB segments too: what a datapath that copies
// frames in user space (OVS netdev on veths) needs to forward them intact.
func SetTxChecksum(ns, ifname string, on bool) error {
	return knob.SetOffloads(ns, ifname, knob.Offloads{"tx": on})
}

// TxChecksum reports whether TX checksum offload is on for some protocol
// (`ethtool -k IFNAME`: "tx-checksumming: on").
func TxChecksum(ns, ifname string) (bool, error) {
	f, err := knob.ReadOffloads(ns, ifname)
	if err != nil {
		return false, err
	}
	return !strings.HasPrefix(f["tx"], "off"), nil
}
