package profile

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The sampler on this machine: a window sees this process's busy loop and
// loopback traffic, and nothing stays counted into the next window.
func TestSamplerWindow(t *testing.T) {
	s := openSampler(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	busy(t, 500*time.Millisecond)
	p, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if p.Samples() < 100 {
		t.Fatalf("%d samples in 0.5 s of a busy loop at %d Hz", p.Samples(), p.Hz)
	}
	var kernel bool
	for _, st := range p.Stacks {
		for _, f := range st.Kernel() {
			if f == "tcp_sendmsg" {
				kernel = true
			}
		}
	}
	if !kernel {
		t.Errorf("no stack through tcp_sendmsg while writing to a TCP socket; top stacks: %v", p.Stacks[:min(5, len(p.Stacks))])
	}
	t.Logf("%d samples, %d stacks, events %v, drops %v", p.Samples(), len(p.Stacks), p.Events, p.Drops)

	// The next window starts empty.
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	q, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if q.Samples() > p.Samples()/2 {
		t.Errorf("an empty window has %d samples after a window of %d: maps not cleared", q.Samples(), p.Samples())
	}
}

// busy keeps this process sending over loopback TCP for d.
func busy(t *testing.T, d time.Duration) { loopbackStream(t, d) }

// openSampler opens a sampler for the test, closed at its end (root only).
func openSampler(t *testing.T) *Sampler {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Naming the namespaces decides what counts: loopback traffic of the root
// namespace counts once the root namespace is named, and this process's
// stacks become a lab's; with no real namespace named, nothing does (other
// labs on the machine included).
func TestSamplerLabNamespaces(t *testing.T) {
	s := openSampler(t)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	window := func(inodes []uint32) *Profile {
		if err := s.SetLabNamespaces(inodes); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		busy(t, 300*time.Millisecond)
		p, err := s.Stop()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lab := func(p *Profile) (n uint64) {
		for _, st := range p.Stacks {
			if st.Lab {
				n += st.Count
			}
		}
		return n
	}
	root := window([]uint32{uint32(st.Ino)})
	if root.Events[EventNetifRx] == 0 || lab(root) == 0 {
		t.Errorf("root namespace named: %d loopback enqueues, %d lab samples; want both", root.Events[EventNetifRx], lab(root))
	}
	// A namespace that does not exist (inode 1): nothing is the labs'.
	none := window([]uint32{1})
	if none.Events[EventNetifRx] != 0 || lab(none) != 0 {
		t.Errorf("no real namespace named: %d enqueues and %d lab samples counted, want none", none.Events[EventNetifRx], lab(none))
	}
}
