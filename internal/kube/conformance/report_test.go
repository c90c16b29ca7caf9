package conformance

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A ginkgo v2 JSON report cut down to the fields it always has: a passed
// suite node, a passed spec, a failed one, one that passed on its second
// attempt and a skipped one.
const sampleReport = `[{"SuitePath":"/e2e","SuiteSucceeded":false,
 "PreRunStats":{"TotalSpecs":7000,"SpecsThatWillRun":4},"RunTime":480000000000,
 "SpecReports":[
  {"ContainerHierarchyTexts":null,"LeafNodeType":"SynchronizedBeforeSuite","LeafNodeText":"","State":"passed","RunTime":2000000000,"NumAttempts":0},
  {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"should serve a basic endpoint from pods","State":"passed","RunTime":20000000000,"NumAttempts":1},
  {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"should implement service.kubernetes.io/headless","State":"failed","RunTime":300000000000,"NumAttempts":1,
   "Failure":{"Message":"waiting for service to be down timed out\nmore","Location":{"FileName":"test/e2e/network/service.go","LineNumber":2400}}},
  {"ContainerHierarchyTexts":["[sig-network] Conntrack"],"LeafNodeType":"It","LeafNodeText":"should be able to preserve UDP traffic when server pod cycles for a ClusterIP service","State":"passed","RunTime":60000000000,"NumAttempts":2},
  {"ContainerHierarchyTexts":["[sig-network] Services"],"LeafNodeType":"It","LeafNodeText":"should be rejected when no endpoints exist","State":"skipped","RunTime":0,"NumAttempts":0}
 ]}]`

func TestParseReport(t *testing.T) {
	o, err := parseReport(strings.NewReader(sampleReport))
	if err != nil {
		t.Fatal(err)
	}
	if o.WillRun != 4 || o.Total != 7000 || o.Passed != 2 {
		t.Errorf("will run %d of %d, passed %d; want 4 of 7000, 2", o.WillRun, o.Total, o.Passed)
	}
	want := []Failure{{Name: "[sig-network] Services should implement service.kubernetes.io/headless", State: "failed",
		Location: "test/e2e/network/service.go:2400", Message: "waiting for service to be down timed out", RunTime: 300 * time.Second}}
	if !reflect.DeepEqual(o.Failed, want) {
		t.Errorf("failed %+v, want %+v", o.Failed, want)
	}
	if len(o.Flaky) != 1 || !strings.HasSuffix(o.Flaky[0].Name, "for a ClusterIP service") {
		t.Errorf("flaky %+v, want the Conntrack spec", o.Flaky)
	}
	if len(o.Ran) != 3 || o.Ran[0] != "[sig-network] Services should serve a basic endpoint from pods" {
		t.Errorf("ran %q, want the three specs that were not skipped", o.Ran)
	}
}

func TestParseReportSuiteNodeFailure(t *testing.T) {
	o, err := parseReport(strings.NewReader(`[{"PreRunStats":{"TotalSpecs":7000,"SpecsThatWillRun":47},"SpecReports":[
	 {"LeafNodeType":"SynchronizedBeforeSuite","State":"failed","Failure":{"Message":"there are not ready nodes"}}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Failed) != 1 || o.Failed[0].Name != "[SynchronizedBeforeSuite]" || o.Failed[0].Message != "there are not ready nodes" || len(o.Ran) != 0 {
		t.Errorf("failed %+v, ran %v: want the suite node's failure and no spec run", o.Failed, o.Ran)
	}
}

func TestSummaryLines(t *testing.T) {
	out := "Running Suite: Kubernetes e2e suite\n•••\n\x1b[1mRan 47 of 7123 Specs in 463.201 seconds\x1b[0m\n" +
		"\x1b[38;5;9mFAIL!\x1b[0m -- 42 Passed | 5 Failed | 0 Pending | 7076 Skipped\n\nGinkgo ran 1 suite in 7m50s\n"
	want := []string{"Ran 47 of 7123 Specs in 463.201 seconds", "FAIL! -- 42 Passed | 5 Failed | 0 Pending | 7076 Skipped"}
	if got := SummaryLines(strings.NewReader(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("SummaryLines = %q, want %q", got, want)
	}
}

func TestProgress(t *testing.T) {
	out := "•••\n------------------------------\n• [FAILED] [300.123 seconds]\n[sig-network] Services ...\n•\n• [TIMEDOUT] [60 seconds]\n"
	if f, failed := progress(out); f != 6 || failed != 2 {
		t.Errorf("progress = %d finished, %d failed; want 6, 2", f, failed)
	}
}
