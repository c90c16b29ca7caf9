package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// ipamConfig is the configuration handed to the IPAM plugin: the plugin's
// own, at a CNI version the IPAM plugin speaks. A runtime that wants GC
// sends 1.1.0 (libcni collects only such lists), which Debian's host-local
// (up to 1.0.0) refuses, although ADD, CHECK and DEL are the same in both:
// it gets the highest version it supports that is not newer.
func ipamConfig(ctx context.Context, conf *NetConf, stdin []byte) ([]byte, error) {
	if newer, _ := version.GreaterThanOrEqualTo(conf.CNIVersion, "1.1.0"); !newer {
		return stdin, nil
	}
	supported, err := ipamVersions(ctx, conf)
	if err != nil {
		return nil, err
	}
	if slices.Contains(supported, conf.CNIVersion) {
		return stdin, nil
	}
	best := ""
	for _, v := range supported {
		notNewer, _ := version.GreaterThanOrEqualTo(conf.CNIVersion, v)
		if better, _ := version.GreaterThanOrEqualTo(v, best); notNewer && (best == "" || better) {
			best = v
		}
	}
	if best == "" {
		return nil, fmt.Errorf("IPAM plugin %s speaks none of the CNI versions up to %s (it supports %v)", conf.IPAM.Type, conf.CNIVersion, supported)
	}
	var raw map[string]any
	if err := json.Unmarshal(stdin, &raw); err != nil {
		return nil, err
	}
	raw["cniVersion"] = best
	return json.Marshal(raw)
}

// ipamVersions are the CNI versions the IPAM plugin says it supports.
func ipamVersions(ctx context.Context, conf *NetConf) ([]string, error) {
	path, err := invoke.FindInPath(conf.IPAM.Type, filepath.SplitList(os.Getenv("CNI_PATH")))
	if err != nil {
		return nil, err
	}
	vi, err := invoke.GetVersionInfo(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	return vi.SupportedVersions(), nil
}
