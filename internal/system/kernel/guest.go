package kernel

import (
	"os"
	"strings"
)

// The stock-kernel harness (e2e/kernels) runs some packages' tests inside a
// qemu guest of a Debian kernel and says so through the environment: there a
// mode or feature reported unavailable is a failure, not a skip, unless the
// guest's kernel is listed as lacking it.
const (
	// GuestEnv is set inside the harness's guest.
	GuestEnv = "VNETLAB_KERNEL_GUEST"
	// GuestLacksEnv lists, comma-separated, the modes and features (and
	// "ebpf": vnetlab's tc programs) the guest's kernel lacks.
	GuestLacksEnv = "VNETLAB_KERNEL_LACKS"
)

// InGuest says whether this runs inside the harness's guest.
func InGuest() bool { return os.Getenv(GuestEnv) != "" }

// GuestLacks says whether the harness's guest kernel lacks name.
func GuestLacks(name string) bool {
	for _, l := range strings.Split(os.Getenv(GuestLacksEnv), ",") {
		if l == name {
			return true
		}
	}
	return false
}

// GuestHas says whether this runs in the harness's guest and its kernel has
// name: a test that finds name unavailable there must fail.
func GuestHas(name string) bool { return InGuest() && !GuestLacks(name) }
