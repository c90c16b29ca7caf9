package scenario

import (
	"strings"
	"testing"
)

// Service fields: parsed, and bad ones named by file, line, field.
func TestServiceFields(t *testing.T) {
	s, err := Parse("x.yaml", []byte("mode: veth-routed\nprovider: nftables\nproviders: [iptables, ebpf]\n"+
		"services:\n  - {service: 10.96.0.1:80/udp, backends: [pod-a, \"192.168.10.11:5201\"]}\nextra_services: 1000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Provider != "nftables" || len(s.Providers) != 2 || len(s.Services) != 1 || len(s.Services[0].Backends) != 2 ||
		len(s.ExtraServices) != 1 || s.ExtraServices[0] != 1000 {
		t.Errorf("parsed %+v", s)
	}
	if s, err := Parse("x.yaml", []byte("mode: bridge\nextra_services: [0, 1000, 10000]\n")); err != nil || len(s.ExtraServices) != 3 {
		t.Errorf("extra_services list: %v, %v", s, err)
	}
	cases := []struct{ body, want string }{
		{"mode: bridge\nprovider: ipvs\n", `x.yaml:2: field provider: unknown provider "ipvs"`},
		{"mode: bridge\nproviders: [iptables, ipvs]\n", `x.yaml:2: field providers[1]: unknown provider "ipvs"`},
		{"mode: bridge\nservices:\n  - {service: 10.96.0.300:80, backends: [pod-a]}\n", `x.yaml:3: field services[0]: service "10.96.0.300:80": "10.96.0.300" is not an IPv4 or IPv6 address`},
		{"mode: bridge\nservices:\n  - {service: 10.96.0.1:80}\n", `x.yaml:3: field services[0]: service 10.96.0.1:80 has no backends`},
		{"mode: bridge\nservices:\n  - {service: 10.96.0.1:80, backends: [\"pod-a:0\"]}\n", `field services[0]: backend "pod-a:0"`},
		{"mode: bridge\nextra_services: [0, -5]\n", `x.yaml:2: field extra_services[1]: -5: want 0 to`},
		{"mode: bridge\nextra_services: lots\n", `x.yaml:2: "lots" is not a number`},
	}
	for _, c := range cases {
		_, err := Parse("x.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.body, err, c.want)
		}
	}
}
