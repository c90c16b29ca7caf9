package labservice

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// `svc add --service` and `svc del --service`: a key read, written back
// (Key.String) and read again is the same key, with a unicast address and a
// port; anything else is a one-line error that quotes the input.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"10.96.0.100:5201", "10.96.0.100:5201/tcp", "10.96.0.101:80/UDP", "[fd00:10:96::100]:5201/tcp",
		"[fd00:10:96::100]:5201", "fd00::a:80", "10.96.0.100", "10.96.0.100:", "[::ffff:10.0.0.1]:80", "[fe80::1%eth0]:80", "10.96.0.100:0/sctp", "/tcp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "service ") {
				t.Fatalf("error does not say which service: %v", err)
			}
			return
		}
		if !k.VIP.IsValid() || k.VIP.Zone() != "" || k.VIP.Is4In6() || k.Port == 0 || (k.Proto != TCP && k.Proto != UDP) {
			t.Fatalf("%q read as %+v", s, k)
		}
		k2, err := ParseKey(k.String())
		if err != nil || k2 != k {
			t.Fatalf("%q -> %s -> %+v, %v", s, k, k2, err)
		}
	})
}

// `svc add --backend` (and a scenario's backends): a backend read, written
// back and read again is the same; an address is a unicast one.
func FuzzParseBackend(f *testing.F) {
	for _, s := range []string{"192.168.10.10:5201", "[fd00:10:244::a]:5201", "pod-a:5201", "pod-a", "192.168.10.10", "[fd00::a]",
		"fd00::a", "pod-a:", ":80", "[fd00::a]x", "1.2.3:80", "pod\na:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBackend(s)
		if err != nil {
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "backend ") {
				t.Fatalf("error does not say which backend: %v", err)
			}
			return
		}
		if b.Host == "" {
			t.Fatalf("%q: no host", s)
		}
		written := b.Host
		if strings.Contains(written, ":") {
			written = "[" + written + "]"
		}
		if b.Port != 0 {
			written += ":" + strconv.Itoa(int(b.Port))
		}
		b2, err := ParseBackend(written)
		if err != nil || b2 != b {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, b, written, b2, err)
		}
	})
}

// A scenario's services entry, resolved against a dual-stack lab: refused
// with one line, or every backend is a pod of the lab at its address of
// the clusterIP's family, once, with a port.
func FuzzSpecBuild(f *testing.F) {
	f.Add("10.96.0.100:80/tcp", "pod-a:5201", "192.168.10.12:5201")
	f.Add("[fd00:10:96::100]:5201", "pod-a", "pod-b")
	f.Add("10.96.0.100:5201", "pod-a", "192.168.10.10")
	f.Add("192.168.10.1:80", "pod-a", "")
	f.Add("10.96.0.100:80", "fd00:10:244::a", "pod-z")
	st := &lab.State{Name: "lab", Gateway: "192.168.10.1", Gateway6: "fd00:10:244::1",
		Pods: []lab.PodState{{Name: "pod-a", IP: "192.168.10.10", IP6: "fd00:10:244::a", Ifname: "eth0"},
			{Name: "pod-b", IP: "192.168.10.11", IP6: "fd00:10:244::b", Ifname: "eth0"},
			{Name: "pod-c", IP: "192.168.10.12", IP6: "fd00:10:244::c", Ifname: "eth0"}}}
	st.Spec.Family = family.Dual
	st.Spec.PodCIDR, st.Spec.PodCIDR6 = "192.168.10.0/24", "fd00:10:244::/64"
	f.Fuzz(func(t *testing.T, svc, b1, b2 string) {
		sp := Spec{Service: svc, Backends: []string{b1}}
		if b2 != "" {
			sp.Backends = append(sp.Backends, b2)
		}
		checkErr := sp.Check()
		s, err := sp.Build(st)
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if checkErr != nil {
			t.Fatalf("Check refuses (%v) what Build takes", checkErr)
		}
		if len(s.Backends) != len(sp.Backends) {
			t.Fatalf("%d backends for %d", len(s.Backends), len(sp.Backends))
		}
		seen := map[netip.AddrPort]bool{}
		for _, be := range s.Backends {
			pod := st.Pods[0]
			for _, p := range st.Pods {
				if p.Name == be.Pod {
					pod = p
				}
			}
			want := pod.IP
			if s.VIP.Is6() {
				want = pod.IP6
			}
			if pod.Name != be.Pod || be.IP.String() != want || be.Port == 0 || seen[netip.AddrPortFrom(be.IP, be.Port)] {
				t.Fatalf("backend %+v of %s", be, s)
			}
			seen[netip.AddrPortFrom(be.IP, be.Port)] = true
		}
	})
}

// `ep add` and `ep del`: a pod reference is checked before any lab is
// touched, with one line; one that passes names exactly one pod, found in
// the lab or refused with one line.
func FuzzPodRef(f *testing.F) {
	f.Add("pod-b", "", "", "")
	f.Add("", "eth0", "/var/run/netns/vnl-lab-pod-a", "routed")
	f.Add("pod-a", "eth0", "", "node")
	f.Add("pod-a", "", "x", "")
	f.Add("", "", "vnl-lab-pod-a", "")
	f.Add("", "eth0", "vnl-lab-pod-a", "sideways")
	st := &lab.State{Name: "lab", Pods: []lab.PodState{{Name: "pod-a", NS: "vnl-lab-pod-a", Ifname: "eth0"}, {Name: "pod-b", NS: "vnl-lab-pod-b", Ifname: "eth0"}}}
	f.Fuzz(func(t *testing.T, pod, ifname, netns, placement string) {
		r := PodRef{Pod: pod, Ifname: ifname, NetNS: netns, Placement: placement}
		if err := r.Check(); err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if (pod == "") == (netns == "") {
			t.Fatalf("%+v passed", r)
		}
		ep, err := r.endpoint(st)
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if (pod != "" && ep.Pod != pod) || ep.Placement == "" || ep.Ifname == "" {
			t.Fatalf("%+v -> %+v", r, ep)
		}
	})
}
