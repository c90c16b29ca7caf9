package profile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Kallsyms is the kernel's function symbol table (/proc/kallsyms), sorted by
// address, to name the instruction pointers of kernel stacks.
type Kallsyms struct {
	addrs []uint64
	names []string
	all   map[string]uint64 // every symbol (data too), for Address
	jit   uint64            // addresses from here up, outside any named function, are JIT-compiled BPF
}

// BPFFrame names an address in JIT-compiled BPF (a tc program, a
// tracepoint program): kallsyms lists them only with bpf_jit_kallsyms, and
// then only under their tags.
const BPFFrame = "[bpf]"

// LoadKallsyms reads /proc/kallsyms. Addresses read as zero when
// kptr_restrict hides them from this process: that is an error.
func LoadKallsyms() (*Kallsyms, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := ParseKallsyms(f)
	if err != nil {
		return nil, err
	}
	if len(k.addrs) == 0 || k.addrs[len(k.addrs)-1] == 0 {
		return nil, fmt.Errorf("/proc/kallsyms shows no addresses: run as root (kernel.kptr_restrict hides them)")
	}
	return k, nil
}

// ParseKallsyms reads "ADDRESS TYPE NAME [module]" lines.
func ParseKallsyms(r io.Reader) (*Kallsyms, error) {
	type sym struct {
		addr uint64
		name string
	}
	var syms []sym
	all := map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("kallsyms line %q: %w", sc.Text(), err)
		}
		all[f[2]] = addr
		if t := f[1]; t == "t" || t == "T" || t == "w" || t == "W" {
			syms = append(syms, sym{addr, f[2]})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].addr < syms[j].addr })
	k := &Kallsyms{all: all, jit: all["_einittext"]}
	for _, s := range syms {
		k.addrs = append(k.addrs, s.addr)
		k.names = append(k.names, s.name)
	}
	return k, nil
}

// Address is a symbol's address.
func (k *Kallsyms) Address(name string) (uint64, bool) {
	a, ok := k.all[name]
	return a, ok && a != 0
}

// Name is the function containing ip, without the compiler's clone
// suffixes (.isra.0, .constprop.0, .part.0, .cold): one name per source
// function. "0x..." when ip is below every symbol.
func (k *Kallsyms) Name(ip uint64) string {
	i := sort.Search(len(k.addrs), func(i int) bool { return k.addrs[i] > ip }) - 1
	if i < 0 {
		return fmt.Sprintf("0x%x", ip)
	}
	if k.jit != 0 && ip > k.jit && (k.names[i] == "_einittext" || k.names[i] == "ftrace_trampoline") {
		return BPFFrame
	}
	if jitName.MatchString(k.names[i]) {
		return BPFFrame
	}
	return FunctionName(k.names[i])
}

// jitName is how kallsyms lists a JIT-compiled program (bpf_jit_kallsyms):
// bpf_prog_TAG_NAME; bpf_prog_load and friends are kernel functions.
var jitName = regexp.MustCompile(`^bpf_prog_[0-9a-f]{16}`)

// FunctionName strips compiler clone suffixes from a symbol.
func FunctionName(sym string) string {
	if i := strings.IndexByte(sym, '.'); i > 0 {
		return sym[:i]
	}
	return sym
}

// Stack names a kernel stack as the stack map returns it (leaf first,
// zero-terminated), root first.
func (k *Kallsyms) Stack(ips []uint64) []string {
	n := 0
	for n < len(ips) && ips[n] != 0 {
		n++
	}
	out := make([]string, n)
	for i := 0; i < n; i++ {
		out[n-1-i] = k.Name(ips[i])
	}
	return out
}
