package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// QemuBinary is the emulator the guest runs in.
const QemuBinary = "qemu-system-x86_64"

// Usable says why qemu cannot run guests here, or nil.
func Usable() error {
	if _, err := exec.LookPath(QemuBinary); err != nil {
		return fmt.Errorf("%s is not installed (apt-get install qemu-system-x86)", QemuBinary)
	}
	for _, p := range []string{"apt-get", "apt-cache", "dpkg-deb", "depmod", "xz", "ldd"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is not installed (a Debian machine with kmod and xz-utils is needed to fetch the kernel)", p)
		}
	}
	return nil
}

// Boot is one qemu run.
type Boot struct {
	Kernel  string // vmlinuz
	Initrd  string
	Append  string // kernel command line
	MemMB   int
	CPUs    int
	Timeout time.Duration
}

// Args is qemu's command line. TCG (software emulation): this machine's KVM
// cannot run a stock kernel, so every number measured inside is meaningless;
// only correctness counts.
func (b Boot) Args() []string {
	return []string{"-accel", "tcg", "-cpu", "max", "-m", strconv.Itoa(b.MemMB), "-smp", strconv.Itoa(b.CPUs),
		"-nographic", "-no-reboot", "-nic", "none", "-kernel", b.Kernel, "-initrd", b.Initrd,
		"-append", b.Append}
}

// Run boots the guest and copies its serial console to console until the
// guest powers off (panic=-1 makes a kernel panic power off too).
func (b Boot) Run(ctx context.Context, console io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	c := exec.CommandContext(ctx, QemuBinary, b.Args()...)
	c.Stdout, c.Stderr = console, console
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := c.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("guest still running after %s: killed", b.Timeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", QemuBinary, err)
	}
	return nil
}
