package proxy

import (
	"strings"
	"testing"
)

// Exactly one way to find the pods' veths; a missing or doubled one is one
// line naming the three flags.
func TestConfigPodLinks(t *testing.T) {
	for _, c := range []struct {
		conf Config
		want string // "" = an error
	}{
		{Config{Bridge: "cni0"}, "--bridge cni0"},
		{Config{VethPrefix: "vnl"}, "--veth-prefix vnl"},
		{Config{ByCNI: true}, "--programs-by-cni"},
		{Config{}, ""},
		{Config{Bridge: "cni0", ByCNI: true}, ""},
		{Config{Bridge: "br0", VethPrefix: "vnl"}, ""},
	} {
		got, err := c.conf.PodLinks()
		if c.want != "" && (err != nil || got != c.want) {
			t.Errorf("%+v: %q, %v; want %q", c.conf, got, err, c.want)
		}
		if c.want == "" && (err == nil || !strings.Contains(err.Error(), "exactly one of --bridge NAME") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%+v: %q, %v; want one line naming the three flags", c.conf, got, err)
		}
	}
}
