package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createStep creates one API object of what a cluster installs (CoreDNS,
// flannel).
type createStep struct {
	what   string
	create func() error
}

// creator is a typed client of one kind (cs.CoreV1().ConfigMaps(ns), ...).
type creator[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

// create is the step that creates obj with client c.
func create[T any](ctx context.Context, what string, c creator[T], obj T) createStep {
	return createStep{what: what, create: func() error { _, err := c.Create(ctx, obj, metav1.CreateOptions{}); return err }}
}

// createAll runs the steps in order; an object that exists already counts
// as created. owner names them in errors ("cluster DNS").
func createAll(owner string, steps ...createStep) error {
	for _, s := range steps {
		if err := s.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: create the %s: %w", owner, s.what, err)
		}
	}
	return nil
}
