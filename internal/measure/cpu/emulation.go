package cpu

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// CPUInfoPath is read for the CPU's model; tests point it at fixtures.
var CPUInfoPath = "/proc/cpuinfo"

// Model is the CPU's model name (/proc/cpuinfo's first "model name").
func Model() string {
	f, err := os.Open(CPUInfoPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	return ModelOf(f)
}

// ModelOf reads the first "model name" of a /proc/cpuinfo text.
func ModelOf(f io.Reader) string {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Emulation says why this machine's CPU is emulated in software (every
// instruction translated: throughput and latency measured there say nothing
// about real hardware), or "" when it is not. qemu's TCG names its CPU model
// so, -cpu max included; a hardware-accelerated guest (KVM) shows the host's.
func Emulation() string { return EmulationOf(Model()) }

// EmulationOf is Emulation for a given CPU model name.
func EmulationOf(model string) string {
	if strings.Contains(model, "QEMU TCG") {
		return "software CPU emulation (qemu TCG, CPU model \"" + model + "\"): only correctness counts here, never read throughput or latency"
	}
	return ""
}
