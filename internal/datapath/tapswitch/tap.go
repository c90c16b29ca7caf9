package tapswitch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// VnetHdrLen is the virtio_net_hdr size the offload TAPs use: the 12-byte
// virtio 1.0 header (with num_buffers), as qemu/vhost set it.
const VnetHdrLen = 12

// TUNSETOFFLOAD flags (linux/if_tun.h): what the reader of the TAP accepts.
const (
	tunFCsum = 0x01 // checksum offload: frames may carry partial checksums
	tunFTSO4 = 0x02 // TCP segmentation offload, IPv4
	tunFTSO6 = 0x04 // TCP segmentation offload, IPv6
)

// OpenTap creates TAP device name in the calling thread's network namespace
// (the kernel puts a new TAP in its creator's namespace) and returns its
// file descriptor, blocking, close-on-exec. The TAP is not persistent: it
// disappears when the last descriptor is closed, the way qemu's tap does.
//
// offload=false is seed 000's device: IFF_TAP|IFF_NO_PI, one MTU-sized frame
// per read and write, and the stack computes checksums and segments itself.
// offload=true adds IFF_VNET_HDR (a virtio_net_hdr before each frame) and
// TUNSETOFFLOAD(CSUM|TSO4|TSO6): the TAP then advertises checksum offload
// and TSO, so the kernel hands over 64 KB unsegmented TCP frames with
// partial checksums, and accepts them back the same way.
func OpenTap(name string, offload bool) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if offload {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	if offload {
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, VnetHdrLen); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("TUNSETVNETHDRSZ %s: %w", name, err)
		}
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4|tunFTSO6); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("TUNSETOFFLOAD %s: %w", name, err)
		}
	}
	return fd, nil
}
