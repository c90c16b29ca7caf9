package conformance

import (
	"reflect"
	"strings"
	"testing"
)

func TestTestImages(t *testing.T) {
	list := `registry.k8s.io/e2e-test-images/agnhost:2.55
registry.k8s.io/e2e-test-images/agnhost:2.66.1
registry.k8s.io/e2e-test-images/busybox:1.37.0-2
registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1
registry.k8s.io/e2e-test-images/nginx:1.27.0-2
registry.k8s.io/e2e-test-images/regression-issue-74839:1.5
registry.k8s.io/pause:3.10.2
registry.k8s.io/etcd:3.7.0-0
`
	got, err := testImages(list)
	if err != nil {
		t.Fatal(err)
	}
	want := []testImage{
		{agnhostRepo, []string{"registry.k8s.io/e2e-test-images/agnhost:2.55", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"}},
		{busyboxRepo, []string{"registry.k8s.io/e2e-test-images/busybox:1.37.0-2"}},
		{glibcDNSRepo, []string{"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"}},
		{regressionRepo, []string{"registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"}},
		{pauseRepo, []string{"registry.k8s.io/pause:3.10.2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("testImages = %+v, want %+v", got, want)
	}
	if _, err := testImages("registry.k8s.io/pause:3.10.2\n"); err == nil || !strings.Contains(err.Error(), "no e2e-test-images/agnhost image") {
		t.Errorf("a list without agnhost: %v", err)
	}
}
