package bench

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

// measuringImage is the image a run's pods use, and its pull policy: image
// as given ("" : this vnetlab's, never pulled: vnetlabImage).
func measuringImage(ctx context.Context, image, local string, say func(string, ...any)) (string, corev1.PullPolicy, error) {
	if image != "" {
		return image, corev1.PullIfNotPresent, nil
	}
	img, err := vnetlabImage(ctx, local, say)
	return img, corev1.PullNever, err
}

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
