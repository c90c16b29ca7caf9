package tcbpf

import (
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// FrontendMaps opens a lab's Service frontends, lb_services and
// lb6_services, for the policy programs (internal/datapath/polbpf): a pod's
// egress to a Service is decided after its translation. A lab with no
// Service plane yet gets the two maps created and pinned where Open will
// find them, so that Services added later are seen too. The caller closes
// both.
func FrontendMaps(lab string) (v4, v6 *ebpf.Map, err error) {
	if err := MountBPFFS(); err != nil {
		return nil, nil, err
	}
	dir := PinDir(lab)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("ebpf: pin directory: %w", err)
	}
	spec, err := loadService()
	if err != nil {
		return nil, nil, err
	}
	if err := SizeMaps(spec, dir, true); err != nil {
		return nil, nil, err
	}
	open := func(name string) (*ebpf.Map, error) {
		m, err := ebpf.NewMapWithOptions(spec.Maps[name], ebpf.MapOptions{PinPath: dir})
		if err != nil {
			return nil, fmt.Errorf("ebpf: lab %s: %s: %w", lab, name, err)
		}
		return m, nil
	}
	if v4, err = open(serviceMapLbServices); err != nil {
		return nil, nil, err
	}
	if v6, err = open(serviceMapLb6Services); err != nil {
		v4.Close()
		return nil, nil, err
	}
	return v4, v6, nil
}

// HasFrontends says whether a lab's Service frontends are pinned (its
// Service plane was opened): a process that must not race its maps'
// creation with the plane's owner (a cluster node's policy controller
// beside its Service proxy) waits for them.
func HasFrontends(lab string) bool {
	return HasPin(lab, serviceMapLbServices) && HasPin(lab, serviceMapLb6Services)
}
