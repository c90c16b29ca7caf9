package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

// vnetlabImage is this vnetlab's image reference; a local cluster gets the
// image imported into its nodes when it does not have it yet.
func vnetlabImage(ctx context.Context, local string, say func(string, ...any)) (string, error) {
	self, err := engine.SelfBinary()
	if err != nil {
		return "", err
	}
	img, err := image.Build(self)
	if err != nil {
		return "", err
	}
	if local == "" {
		return img.Ref, nil
	}
	st, err := cluster.Load(local)
	if err != nil {
		return "", err
	}
	if st.Facts[cluster.FactImage] == img.Ref {
		return img.Ref, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("cluster %s lacks this vnetlab's image %s and loading it needs root: run as root, or `vnetlab kube load`", local, img.Ref)
	}
	tmp, err := os.CreateTemp("", "vnetlab-image-*.tar")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := img.Write(tmp.Name()); err != nil {
		return "", err
	}
	say("loading image %s into cluster %s", img.Ref, local)
	return img.Ref, cluster.LoadImages(ctx, local, []string{tmp.Name()})
}
