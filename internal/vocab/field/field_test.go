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
