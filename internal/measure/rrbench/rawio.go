package rrbench

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// setLingerRaw and closeRaw: tcp_crr's calls that never block (SO_LINGER
// {on, 0} makes close send a RST and return; the server's close of a
// connection its client reset or ended is immediate too).
func setLingerRaw(fd int, l *unix.Linger) error {
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(l)), unsafe.Sizeof(*l), 0)
	if e != 0 {
		return e
	}
	return nil
}

func closeRaw(fd int) { _, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }
