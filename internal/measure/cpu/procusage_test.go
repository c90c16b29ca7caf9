package cpu

import (
	"os"
	"testing"
	"time"
)

// This process's usage: its CPU time grows while it spins, and its RSS
// covers a buffer it touched.
func TestOfProcess(t *testing.T) {
	before, err := OfProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
	}
	after, err := OfProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.CPU <= before.CPU {
		t.Errorf("CPU time %s then %s after spinning 300 ms", before.CPU, after.CPU)
	}
	if after.RSS < 64<<20 {
		t.Errorf("RSS %d bytes with a 64 MiB buffer touched", after.RSS)
	}
	_ = buf[len(buf)-1]
}
