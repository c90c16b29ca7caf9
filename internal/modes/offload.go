package modes

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// The legacy ethtool commands `ethtool -k/-K IF tx` use (linux/ethtool.h).
const (
	ethtoolGTxCsum = 0x16
	ethtoolSTxCsum = 0x17
)

type ethtoolValue struct{ cmd, data uint32 }

// ifreqData is struct ifreq with ifr_data (a pointer) as the union member.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// SetTxChecksum is `ethtool -K IFNAME tx on|off` inside namespace ns. With it
// off the stack computes checksums itself and, since TSO needs checksum
// offload, stops sending 64 KB segments too: what a datapath that copies
// frames in user space (OVS netdev on veths) needs to forward them intact.
func SetTxChecksum(ns, ifname string, on bool) error {
	v := ethtoolValue{cmd: ethtoolSTxCsum}
	if on {
		v.data = 1
	}
	if err := ethtoolIoctl(ns, ifname, &v); err != nil {
		return fmt.Errorf("ethtool -K %s tx %s in %s: %w", ifname, onOffWord(on), ns, err)
	}
	return nil
}

// TxChecksum reports whether TX checksum offload is on (`ethtool -k IFNAME`).
func TxChecksum(ns, ifname string) (bool, error) {
	v := ethtoolValue{cmd: ethtoolGTxCsum}
	if err := ethtoolIoctl(ns, ifname, &v); err != nil {
		return false, fmt.Errorf("ethtool -k %s in %s: %w", ifname, ns, err)
	}
	return v.data != 0, nil
}

func ethtoolIoctl(ns, ifname string, v *ethtoolValue) error {
	if len(ifname) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", ifname)
	}
	return nsutil.Do(ns, func() error {
		// The socket belongs to the namespace it is created in; the ioctl
		// finds ifname there.
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var ifr ifreqData
		copy(ifr.name[:], ifname)
		ifr.data = unsafe.Pointer(v)
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
			return errno
		}
		return nil
	})
}
