// Package doctor inspects the machine: which modes this kernel supports,
// which programs are installed, and whether the default experiment can run.
package doctor

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Report is what `vnetlab doctor` prints.
type Report struct {
	Kernel string `json:"kernel"`
	// Emulation is set when the CPU is emulated in software (qemu TCG).
	Emulation string    `json:"emulation,omitempty"`
	Root      bool      `json:"root"`
	Modes     []Item    `json:"modes"`
	Programs  []Program `json:"programs"`
	BPFFS     Item      `json:"bpffs"`
	Notes     []string  `json:"notes,omitempty"`
	// Steadiness is how steady the CPU run pins its tests to is, apart
	// from any path (cpu.Steadiness); nil when not asked for.
	Steadiness *cpu.Steadiness `json:"steadiness,omitempty"`
	// DefaultRunnable is false when plain `vnetlab run` cannot run.
	DefaultRunnable bool   `json:"default_experiment_runnable"`
	Why             string `json:"why_not,omitempty"`
}

// Item is a yes/no with a reason.
type Item struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
	// Families a mode's labs can have here (--ip-family): ipv4, and ipv6
	// and dual where the mode wires IPv6 and the kernel carries it.
	Families []family.Family `json:"families,omitempty"`
}

// Program is an external program vnetlab may run.
type Program struct {
	Name     string `json:"name"`
	Path     string `json:"path,omitempty"`
	Version  string `json:"version,omitempty"`
	Needed   string `json:"needed_for"`
	Package  string `json:"debian_package"`
	Required bool   `json:"required"`
}

// Programs vnetlab uses, the version flag to ask, and what needs them.
var programs = []struct {
	name, flag, needed, pkg string
	required                bool
}{
	{"iperf3", "--version", "tcp_stream, udp_stream (default experiment)", "iperf3", true},
	{"iptables-restore", "--version", "modes' NAT/forward rules, iptables Services", "iptables", true},
	{"sockperf", "--version", "sockperf engine (rr validation)", "sockperf", false},
	{"nft", "--version", "nftables Services", "nftables", false},
	{"ovs-vswitchd", "--version", "ovs modes", "openvswitch-switch", false},
	{"ethtool", "--version", "offload settings (ovs, tap)", "ethtool", false},
	{"clang-19", "--version", "kube up --cni cilium (its agent compiles its datapath with it)", "clang-19", false},
}

// DefaultModes are the modes of plain `vnetlab run` (seed 002's podIP row).
var DefaultModes = []string{modes.VethRouted, modes.Bridge, modes.Macvlan, modes.Ipvlan}

// steadyCV is the CV below which doctor calls a loop steady: the
// statistics' target (docs/statistics.md) for every cell of the default experiment.
const steadyCV = 0.05

// SteadinessWindow is each loop's window in Run's steadiness measurement.
const SteadinessWindow = 250 * time.Millisecond

// Run inspects the machine; with steadyWindows > 0, it also measures how
// steady the CPU run pins its tests to is, in that many windows of each
// loop (SteadinessWindow each).
func Run(steadyWindows int) *Report {
	r := &Report{Root: os.Geteuid() == 0}
	var steadyNote string
	if steadyWindows > 0 { // first: the mode probes' namespaces are torn down by the kernel's workers after them
		steadyNote = steadiness(r, steadyWindows)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	r.Emulation = cpu.Emulation()
	for _, m := range modes.All() {
		it := Item{Name: m.Name, Available: true, Detail: m.Summary}
		if !r.Root {
			it.Available, it.Detail = false, "cannot probe the kernel without root"
		} else if err := modes.Available(m); err != nil {
			it.Available, it.Detail = false, err.Error()
		} else if m.Detail != nil {
			it.Detail += "; " + m.Detail()
		}
		it.Families = modeFamilies(m, r.Root)
		r.Modes = append(r.Modes, it)
	}
	for _, p := range programs {
		pr := Program{Name: p.name, Needed: p.needed, Package: p.pkg, Required: p.required}
		if path, err := exec.LookPath(p.name); err == nil {
			pr.Path = path
			out, _ := exec.Command(path, p.flag).CombinedOutput()
			pr.Version = firstVersion(string(out))
		}
		r.Programs = append(r.Programs, pr)
	}
	r.BPFFS = bpffs()
	r.Notes = append(r.Notes, ebpfNotes(r)...)
	if n := cpuNote(); n != "" {
		r.Notes = append(r.Notes, n)
	}
	if steadyNote != "" {
		r.Notes = append(r.Notes, steadyNote)
	}
	r.DefaultRunnable, r.Why = defaultRunnable(r)
	return r
}

// ebpfNotes says what the eBPF fast paths change for the node's own tools
// (Cilium's documentation says the same of its BPF host routing).
func ebpfNotes(r *Report) []string {
	var notes []string
	for _, it := range r.Modes {
		if m, err := modes.Get(it.Name); err == nil && it.Available && m.Services.NodeNote != "" {
			notes = append(notes, m.Services.NodeNote)
		}
	}
	if root, err := cgroup.Root(); err != nil {
		notes = append(notes, labservice.EBPFSock+" (socket-level Services): unavailable: "+err.Error())
	} else {
		notes = append(notes, labservice.EBPFSock+" (socket-level Services): translated at connect()/sendmsg() for processes in the lab's own cgroup ("+root+"/"+cgroup.Sub+"/<lab>), never the root cgroup; no packet carries the clusterIP, so node and pod iptables never see it")
	}
	return notes
}

// cpuNote warns, on a machine with few CPUs, what an unpinned rr/crr run
// measures, and what run does about it by default.
func cpuNote() string {
	allowed, err := cpupin.Allowed()
	if err != nil {
		return ""
	}
	w := cpupin.UnpinnedWarning("rr/crr tests run", len(allowed))
	if w == "" {
		return ""
	}
	last := allowed[len(allowed)-1]
	return fmt.Sprintf("CPUs %s: %s (run's default, --cpu-affinity auto, puts their client and server on CPU %d; kube run leaves them unpinned unless told)", cpupin.FormatList(allowed), w, last)
}

// steadiness measures the CPU run pins its tests to (the last allowed one,
// cpupin.Auto's) and says what it means for a run's CVs.
func steadiness(r *Report, windows int) string {
	allowed, err := cpupin.Allowed()
	if err != nil || len(allowed) == 0 {
		return ""
	}
	s, err := cpu.MeasureSteadiness(allowed[len(allowed)-1], windows, SteadinessWindow)
	if err != nil {
		return err.Error()
	}
	r.Steadiness = &s
	n := fmt.Sprintf("steadiness of CPU %d (%d windows of %s each, alternating): arithmetic loop CV %.1f%%, memory-bound pointer chase (%d MB) CV %.1f%%; a system call costs %.0f ns (request/response rates scale with it from host to host)",
		s.CPU, s.Windows, SteadinessWindow, 100*s.ArithCV, s.MemoryBytes>>20, 100*s.MemoryCV, s.SyscallNS)
	if worst := max(s.ArithCV, s.MemoryCV); worst > steadyCV {
		what := "memory speed here varies (another tenant's cache and memory traffic, most likely)"
		if s.ArithCV > steadyCV {
			what = "this CPU's own speed varies (the host gives it less time than it reports as steal)"
		}
		n += fmt.Sprintf(": %s more than the %.0f%% a steady cell needs; a stream's or rr's CV near %.0f%% is the machine's, not its path's", what, 100*steadyCV, 100*worst)
	}
	return n + "; " + advice(s)
}

// advice is the method and rounds a run needs here for every comparison
// within ±2%, from the worst loop's CV: two cells' samples each moving
// that much apart from what their round shares spread a round's ratio by
// √2 times it (an upper bound: a drift both share cancels in the pair).
func advice(s cpu.Steadiness) string {
	const target = 0.02
	worst := max(s.ArithCV, s.MemoryCV)
	n := analysis.RoundsForSpread(math.Sqrt2*worst, target)
	return fmt.Sprintf("for comparisons within ±2%%: vnetlab run --precision 2%% (paired rounds, stops when every interval is that narrow), about %d rounds here (a round is every cell's sample once: --max-time ≈ %d × cells × --duration)", n, n)
}

var versionRE = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

func firstVersion(s string) string {
	line := strings.SplitN(strings.TrimSpace(s), "\n", 2)[0]
	if v := versionRE.FindString(line); v != "" {
		return v
	}
	return line
}

func bpffs() Item {
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &fs); err == nil && fs.Type == unix.BPF_FS_MAGIC {
		return Item{Name: "bpffs", Available: true, Detail: "mounted at /sys/fs/bpf"}
	}
	return Item{Name: "bpffs", Available: true, Detail: "not mounted: vnetlab mounts it at /sys/fs/bpf when an eBPF mode needs it"}
}

func defaultRunnable(r *Report) (bool, string) {
	if !r.Root {
		return false, "not root"
	}
	for _, p := range r.Programs {
		if p.Required && p.Path == "" {
			return false, p.Name + " is missing: apt-get install " + p.Package
		}
	}
	for _, m := range r.Modes {
		for _, d := range DefaultModes {
			if m.Name == d && m.Available {
				return true, ""
			}
		}
	}
	return false, "none of the default modes is available"
}

// modeFamilies are the IP families m's labs can have on this machine (IPv6
// needs the mode's wiring and, probed as root, a kernel that carries it).
func modeFamilies(m modes.Mode, root bool) []family.Family {
	if !m.IPv6 || (root && kernel.Check(kernel.IPv6) != nil) {
		return []family.Family{family.IPv4}
	}
	return family.All
}
