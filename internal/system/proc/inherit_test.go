package proc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// A descriptor vnetlab inherited without close-on-exec (as `flock LOCK
// vnetlab ...` hands over its lock) does not reach the processes it starts.
func TestInheritedDescriptorsNotPassedOn(t *testing.T) {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0) // no O_CLOEXEC: as if inherited
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	inheritedOnce = sync.Once{} // marked at the first Start since this descriptor opened
	out, err := Command(context.Background(), "", "ls", "/proc/self/fd").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(out)) {
		if f == strconv.Itoa(fd) {
			t.Fatalf("the started process holds descriptor %d (%s): inherited descriptors must be close-on-exec", fd, strings.Join(strings.Fields(string(out)), " "))
		}
	}
}
