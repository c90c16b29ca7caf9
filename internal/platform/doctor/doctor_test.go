package doctor

import (
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"strings"
	"testing"
)

// The steadiness note names the CPU measured and both loops' CVs, and the
// report carries the numbers (doctor -o json).
func TestSteadinessNote(t *testing.T) {
	r := &Report{}
	n := steadiness(r, 2)
	if r.Steadiness == nil || r.Steadiness.Windows != 2 {
		t.Fatalf("steadiness %+v (note %q)", r.Steadiness, n)
	}
	for _, want := range []string{"steadiness of CPU ", "arithmetic loop CV ", "memory-bound pointer chase (32 MB) CV "} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	if worst := max(r.Steadiness.ArithCV, r.Steadiness.MemoryCV); (worst > steadyCV) != strings.Contains(n, "is the machine's, not its path's") {
		t.Errorf("CVs %.3f/%.3f against %.2f, note %q", r.Steadiness.ArithCV, r.Steadiness.MemoryCV, steadyCV, n)
	}
	if !strings.Contains(n, "vnetlab run --precision 2%") {
		t.Errorf("the note advises no method: %q", n)
	}
}

// The advice's rounds grow with the machine's spread: a steady CPU needs
// only the first look's rounds, one whose memory speed moves 6% far more.
func TestAdviceRounds(t *testing.T) {
	steady := advice(cpu.Steadiness{ArithCV: 0.005, MemoryCV: 0.008})
	noisy := advice(cpu.Steadiness{ArithCV: 0.01, MemoryCV: 0.06})
	if !strings.Contains(steady, "about 10 rounds") || !strings.Contains(noisy, "about 106 rounds") {
		t.Errorf("steady: %q\nnoisy: %q", steady, noisy)
	}
}
