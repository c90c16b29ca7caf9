package field

import (
	"fmt"
	"testing"
)

func TestRender(t *testing.T) {
	err := fmt.Errorf("cluster k: %w", Errorf("cni_mode", "{cni_mode} %q: add {cni} vnetlab", "macvlan"))
	if got := err.Error(); got != `cluster k: --cni-mode "macvlan": add --cni vnetlab` {
		t.Errorf("Error: %q", got)
	}
	if got := Rendered(err, Key).Error(); got != `cluster k: cni_mode "macvlan": add cni vnetlab` {
		t.Errorf("as keys: %q", got)
	}
	plain := fmt.Errorf("no field here")
	if Rendered(plain, Key) != plain || Rendered(nil, Key) != nil {
		t.Error("an error without fields changed")
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                     "plain",
		"separator: 0\r0":           `separator: 0\r0`,
		"a\nb\tc\x00":               `a\nb\tc\x00`,
		"ünïcode stays, \u2028 too": "ünïcode stays, \u2028 too",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
