package profile

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// A folded-stacks file (a profile's .folded, plain or gzipped, read back
// to draw flame graphs after a run; a recorded profile seeds it): refused
// with one line, or read, written back (WriteFolded) and read again the
// same; summarised, drawn and written as pprof without an error.
func FuzzReadFolded(f *testing.F) {
	b, err := os.ReadFile("testdata/tcp_rr-bridge.json")
	if err != nil {
		f.Fatal(err)
	}
	var rec recorded
	if err := json.Unmarshal(b, &rec); err != nil {
		f.Fatal(err)
	}
	rec.Stacks = rec.Stacks[:min(len(rec.Stacks), 30)] // a seed of a few hundred bytes per stack
	var folded bytes.Buffer
	if err := WriteFolded(&folded, &rec.Profile); err != nil {
		f.Fatal(err)
	}
	f.Add(folded.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("iperf3@lab;[user iperf3@lab];entry_SYSCALL_64;tcp_sendmsg 12\nswapper;do_idle 40\n"))
	zw.Close()
	f.Add(gz.Bytes())
	for _, s := range []string{"", "x 1", "a;b c;d 5", ";f 3", "x@lab;[user x@lab];f 2\nx;[user x];f 2", "no count", "x -1", "x 5\r\ny 6", "\x1f\x8b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ReadFolded(bytes.NewReader(b), 997)
		if err != nil {
			if p != nil {
				t.Fatalf("refused (%v) and yet read", err)
			}
			fieldtest.OneLine(t, err)
			return
		}
		var out bytes.Buffer
		if err := WriteFolded(&out, p); err != nil {
			t.Fatal(err)
		}
		q, err := ReadFolded(bytes.NewReader(out.Bytes()), 997)
		if err != nil {
			t.Fatalf("written back, refused: %v\n%s", err, out.Bytes())
		}
		var out2 bytes.Buffer
		if err := WriteFolded(&out2, q); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("round trip differs:\n%q\n%q", out.Bytes(), out2.Bytes())
		}
		if p.Samples() != q.Samples() {
			t.Fatalf("%d samples, %d after the round trip", p.Samples(), q.Samples())
		}
		if len(p.Stacks) > 200 {
			return
		}
		p.Compact()
		Summarize(p, DefaultRules, 1000, "transaction")
		if err := WritePprof(&bytes.Buffer{}, p, DefaultRules); err != nil {
			t.Fatalf("pprof: %v", err)
		}
		if err := WriteFlameGraph(&bytes.Buffer{}, p, DefaultRules, FlameOptions{Title: "t", USPerSample: 1, Unit: "transaction"}); err != nil {
			t.Fatalf("flame graph: %v", err)
		}
	})
}

// /proc/kallsyms text (the IPv6 functions' list seeds it): refused with
// one line, or read; written back as the functions it kept (sorted, with
// the table's other symbols) it reads the same; every function's address
// names it (or [bpf]), and a stack of any addresses is named frame for
// frame.
func FuzzParseKallsyms(f *testing.F) {
	f.Add([]byte("ffffffff81000000 T _stext\nffffffff81001000 t tcp_v4_rcv.isra.0\nffffffff81002000 W weak_fn\nffffffff82000000 D some_data\n" +
		"ffffffff83000000 T _einittext\nffffffffc0001000 t bpf_prog_6deef7357e7b4530_tc_ingress [bpf]\n"))
	f.Add([]byte("0000000000000000 T hidden\n0000000000000000 t other\n"))
	f.Add([]byte("zz T bad\n"))
	f.Add([]byte("ffffffff81000000 T a\nffffffff81000000 T b\nffffffff81000000 d a\n"))
	if b, err := os.ReadFile("testdata/kallsyms-ipv6.txt"); err == nil {
		var lines []string
		for i, l := range strings.Split(string(b), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, fmt.Sprintf("ffffffff81%06x t %s", i*16, l))
			}
		}
		f.Add([]byte(strings.Join(lines, "\n")))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKallsyms(bytes.NewReader(b))
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if !sort.SliceIsSorted(k.addrs, func(i, j int) bool { return k.addrs[i] < k.addrs[j] }) || len(k.addrs) != len(k.names) {
			t.Fatal("functions not sorted by address")
		}
		var out bytes.Buffer
		for n, a := range k.all {
			if !slices.Contains(k.names, n) {
				fmt.Fprintf(&out, "%016x d %s\n", a, n)
			}
		}
		for i := range k.addrs {
			fmt.Fprintf(&out, "%016x T %s\n", k.addrs[i], k.names[i])
		}
		k2, err := ParseKallsyms(&out)
		if err != nil {
			t.Fatalf("written back, refused: %v", err)
		}
		if !slices.Equal(k.addrs, k2.addrs) || !slices.Equal(k.names, k2.names) {
			t.Fatalf("round trip differs:\n%v %v\n%v %v", k.addrs, k.names, k2.addrs, k2.names)
		}
		var ips []uint64
		for i, a := range k.addrs {
			name := k.Name(a)
			if name == "" || (name != BPFFrame && !slices.ContainsFunc(k.names, func(n string) bool { return FunctionName(n) == name })) {
				t.Fatalf("address %x of %s named %q", a, k.names[i], name)
			}
			ips = append(ips, a, a+1, a-1)
		}
		ips = append(ips, 0, ^uint64(0))
		if st := k.Stack(append(ips[:min(len(ips), 64):min(len(ips), 64)], 0, 5)); len(st) > 64 {
			t.Fatalf("stack of %d frames past the 0", len(st))
		}
	})
}

// The stages.rules format (stages.rules seeds it): refused with one line
// naming the line, or read; written back from its rules it reads the same,
// and any stack is attributed to one of its stages.
func FuzzParseRules(f *testing.F) {
	f.Add(stageRulesText)
	for _, s := range []string{"stage a net A\nfoo bar*\ncomm=iperf3\n", "foo\n", "stage a warp A\n", "stage a net A\nstage a net B\n",
		"stage a net A\nx\nstage b task B\nx\n", "stage a net A\nf*o\n", "stage a net A # c\n* comm=\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseRules(text)
		if err != nil {
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "stages line ") {
				t.Fatalf("error does not name the line: %v", err)
			}
			return
		}
		var out strings.Builder
		for i, st := range r.Stages {
			fmt.Fprintf(&out, "stage %s %s %s\n", st.ID, st.Kind, st.Name)
			var pats []string
			for p, s := range r.exact {
				if s == i {
					pats = append(pats, p)
				}
			}
			for c, s := range r.comms {
				if s == i {
					pats = append(pats, "comm="+c)
				}
			}
			for _, p := range r.prefixes {
				if p.stage == i {
					pats = append(pats, p.prefix+"*")
				}
			}
			sort.Strings(pats)
			for _, p := range pats {
				fmt.Fprintln(&out, p)
			}
		}
		r2, err := ParseRules(out.String())
		if err != nil {
			t.Fatalf("written back, refused: %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(r.Stages, r2.Stages) || !reflect.DeepEqual(r.exact, r2.exact) || !reflect.DeepEqual(r.comms, r2.comms) {
			t.Fatalf("round trip differs:\n%s", out.String())
		}
		ids := []string{StageKernelOther, StageOther}
		for _, st := range r.Stages {
			ids = append(ids, st.ID)
		}
		for _, st := range []Stack{{Comm: "iperf3", Frames: []string{UserFrame, "tcp_sendmsg", "ip_output"}}, {Comm: "swapper", Frames: []string{"do_idle"}}, {Comm: "x"}} {
			if id := r.Attribute(st); !slices.Contains(ids, id) {
				t.Fatalf("stack %v attributed to %q, no stage", st, id)
			}
		}
	})
}
