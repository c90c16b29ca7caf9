package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Files a run leaves in its report directory.
const (
	JSONReport  = "report.json" // ginkgo's JSON report
	JUnitReport = "junit.xml"   // ginkgo's JUnit report
	GinkgoLog   = "ginkgo.log"  // ginkgo's output (every failure in full)
)

const (
	// interruptGrace is how long ginkgo gets, once interrupted, to run the
	// specs' cleanups and write its reports before it is killed.
	interruptGrace = time.Minute
	progressEvery  = time.Minute
)

// Result is what a run did.
type Result struct {
	Spec Spec
	// Cluster is the cluster's state while it was up (nil if it never came up).
	Cluster *lab.State
	Outcome
	// Summary is upstream's summary lines, from ginkgo's output.
	Summary []string
	// Steps are how long each step took, in order.
	Steps []Step
}

// Step is one timed step of a run.
type Step struct {
	What string
	Took time.Duration
}

// Report returns the path of one of the run's report files.
func (r *Result) Report(file string) string { return filepath.Join(r.Spec.ReportDir, file) }

// Run builds what the specs need, brings up a local cluster, runs the specs
// and removes the cluster (also when the specs fail or ctx is cancelled).
// A run whose specs fail returns the result and no error: the caller reads
// Failed. say gets progress lines.
func Run(ctx context.Context, spec Spec, say func(string, ...any)) (*Result, error) {
	spec, err := spec.Resolve()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("a conformance run brings up a local cluster, which needs root: run it with sudo")
	}
	if _, err := lab.Load(spec.Cluster.Name); err == nil {
		return nil, fmt.Errorf("a lab or cluster named %s exists: remove it (vnetlab kube down %s) or choose another --name", spec.Cluster.Name, spec.Cluster.Name)
	}
	if spec.ReportDir, err = filepath.Abs(spec.ReportDir); err != nil {
		return nil, err
	}
	r := &Result{Spec: spec}
	step := func(what string, start time.Time) {
		r.Steps = append(r.Steps, Step{What: what, Took: time.Since(start)})
	}

	start := time.Now()
	k8s, err := binaries.Ensure(ctx, say) // kubectl, which specs run
	if err != nil {
		return nil, err
	}
	e2eBin, err := binaries.EnsureE2E(ctx, say)
	if err != nil {
		return nil, err
	}
	step("build", start)

	// e2e.test's temporary files go to a directory of the run's own, removed
	// with it: upstream's kubectl kuberc specs make a directory and a file in
	// TMPDIR in every e2e.test process, even one that does not run them, and
	// never remove them.
	tmp, err := os.MkdirTemp("", "vnetlab-conformance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	e2e := e2eRunner{bin: e2eBin, tmp: tmp}

	start = time.Now()
	selected, err := e2e.dryRun(ctx, spec)
	if err != nil {
		return nil, err
	}
	if selected.WillRun == 0 {
		return nil, fmt.Errorf("--focus %q with --skip %q selects none of e2e.test's %d specs: see `e2e.test --ginkgo.dry-run --ginkgo.v` in %s", spec.Focus, spec.Skip, selected.Total, e2eBin)
	}
	say("%d of e2e.test's %d specs selected (%s)", selected.WillRun, selected.Total, spec.selection())
	imgDir := filepath.Join(tmp, "images")
	if err := os.Mkdir(imgDir, 0o700); err != nil {
		return nil, err
	}
	tars, err := e2e.writeImages(ctx, imgDir, say)
	if err != nil {
		return nil, err
	}
	step("images", start)
	if err := os.MkdirAll(spec.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("report directory: %w", err)
	}

	start = time.Now()
	say("bringing up cluster %s: %d nodes in %d zones, proxy %s, CNI %s %s, NetworkPolicy %s", spec.Cluster.Name, spec.Cluster.Nodes, spec.Cluster.Zones, spec.Cluster.Proxy, spec.Cluster.CNI, spec.Cluster.CNIMode, spec.Cluster.Network().Policy)
	st, err := cluster.Up(ctx, spec.Cluster, say)
	if err != nil {
		return nil, err
	}
	r.Cluster = st
	defer func() {
		start := time.Now()
		say("removing cluster %s", spec.Cluster.Name)
		if derr := cluster.Down(spec.Cluster.Name, say); derr != nil {
			say("kube down %s: %v (remove it with `vnetlab kube down %s`)", spec.Cluster.Name, derr, spec.Cluster.Name)
		}
		step("cluster down", start)
	}()
	if err := cluster.LoadImages(ctx, spec.Cluster.Name, tars); err != nil {
		return r, err
	}
	step("cluster up", start)

	start = time.Now()
	err = e2e.runSpecs(ctx, spec, st, k8s, selected.WillRun, say)
	step("specs", start)
	if log, lerr := os.Open(r.Report(GinkgoLog)); lerr == nil {
		r.Summary = SummaryLines(log)
		log.Close()
	}
	o, rerr := ReadReport(r.Report(JSONReport))
	if rerr == nil {
		r.Outcome = o
	}
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("interrupted (%w): the specs' reports so far are in %s; the cluster is removed", ctx.Err(), spec.ReportDir)
	case rerr != nil:
		return r, fmt.Errorf("%v; ginkgo: %v (its output: %s)", rerr, err, r.Report(GinkgoLog))
	}
	// ginkgo exits non-zero when a spec fails: the outcome says so.
	return r, nil
}

// e2eFlags are e2e.test's own flags for a run against cluster st from its
// control plane's namespace. The skeleton provider needs no cloud and no
// SSH; --num-nodes, because in parallel runs only process 1 would count the
// nodes, and specs that need several would skip.
func e2eFlags(spec Spec, st *lab.State, k8s, outDir string) []string {
	return []string{
		"--kubeconfig=" + cluster.InternalKubeconfig(st.Name),
		"--provider=skeleton",
		"--num-nodes=" + strconv.Itoa(len(st.Nodes)),
		"--kubectl-path=" + filepath.Join(k8s, binaries.Kubectl),
		"--e2e-output-dir=" + outDir,
		"--disable-log-dump",
	}
}

// e2eRunner runs upstream's e2e.test from directory bin (through ginkgo
// for the specs), its temporary files in tmp.
type e2eRunner struct{ bin, tmp string }

// env is the environment of e2e.test and ginkgo: the caller's, TMPDIR tmp.
func (e e2eRunner) env() []string { return append(os.Environ(), "TMPDIR="+e.tmp) }

// dryRun asks e2e.test which specs the focus and skip select, without a
// cluster.
func (e e2eRunner) dryRun(ctx context.Context, spec Spec) (Outcome, error) {
	dir, err := os.MkdirTemp(e.tmp, "dryrun-")
	if err != nil {
		return Outcome{}, err
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, JSONReport)
	c := exec.CommandContext(ctx, filepath.Join(e.bin, binaries.E2ETest), "--ginkgo.dry-run", "--ginkgo.no-color", "--ginkgo.silence-skips",
		"--ginkgo.focus="+spec.Focus, "--ginkgo.skip="+spec.Skip, "--ginkgo.json-report="+report,
		"--provider=skeleton", "--num-nodes="+strconv.Itoa(spec.Cluster.Nodes), "--e2e-output-dir="+dir)
	c.Dir, c.Env = dir, e.env()
	out, err := c.CombinedOutput()
	o, rerr := ReadReport(report)
	if rerr != nil {
		return o, fmt.Errorf("e2e.test --ginkgo.dry-run: %v: %s", err, tail(string(out), 600))
	}
	return o, nil
}

// writeImages builds the test images e2e.test names and writes each as an
// archive in dir.
func (e e2eRunner) writeImages(ctx context.Context, dir string, say func(string, ...any)) ([]string, error) {
	c := exec.CommandContext(ctx, filepath.Join(e.bin, binaries.E2ETest), "--list-images")
	c.Env = e.env()
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("e2e.test --list-images: %v", err)
	}
	imgs, err := testImages(string(out))
	if err != nil {
		return nil, err
	}
	coreDNS, err := binaries.EnsureCoreDNS(ctx, say)
	if err != nil {
		return nil, err
	}
	in := imageInputs{e2eBin: e.bin, coreDNS: coreDNS}
	if in.tlsCert, in.tlsKey, err = writePorterTLS(dir); err != nil {
		return nil, fmt.Errorf("agnhost's TLS certificate: %w", err)
	}
	var tars []string
	for _, ti := range imgs {
		im, err := builders[ti.repo](in, ti.refs)
		if err != nil {
			return nil, err
		}
		tar := filepath.Join(dir, strings.ReplaceAll(ti.repo, "/", "_")+".tar")
		if err := im.Write(tar); err != nil {
			return nil, err
		}
		say("test image %s", strings.Join(ti.refs, ", "))
		tars = append(tars, tar)
	}
	return tars, nil
}

// runSpecs runs the specs with ginkgo in the cluster's control-plane
// namespace, its output in the report directory's log, a progress line now
// and then. Interrupted, ginkgo gets interruptGrace to clean up, then its
// processes (a process group of their own) are killed.
func (e e2eRunner) runSpecs(ctx context.Context, spec Spec, st *lab.State, k8s string, willRun int, say func(string, ...any)) error {
	logPath := filepath.Join(spec.ReportDir, GinkgoLog)
	for _, f := range []string{GinkgoLog, JSONReport, JUnitReport} {
		_ = os.Remove(filepath.Join(spec.ReportDir, f))
	}
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{
		"--procs=" + strconv.Itoa(spec.Procs), "--timeout=" + spec.Timeout.String(),
		"--focus=" + spec.Focus, "--skip=" + spec.Skip, "--flake-attempts=" + strconv.Itoa(spec.FlakeAttempts),
		"--no-color", "--silence-skips",
		"--output-dir=" + spec.ReportDir, "--json-report=" + JSONReport, "--junit-report=" + JUnitReport,
		filepath.Join(e.bin, binaries.E2ETest), "--",
	}
	args = append(args, e2eFlags(spec, st, k8s, spec.ReportDir)...)
	c := proc.Command(ctx, st.Ext, filepath.Join(e.bin, binaries.Ginkgo), args...)
	c.Dir, c.Env, c.Stdout, c.Stderr = spec.ReportDir, e.env(), log, log
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGINT) }
	c.WaitDelay = interruptGrace
	say("running %d specs with %d ginkgo processes (output: %s)", willRun, spec.Procs, logPath)
	start := time.Now()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start ginkgo: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			// What ginkgo started and left behind (killed after the grace).
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			return err
		case <-tick.C:
			b, _ := os.ReadFile(logPath)
			finished, failed := progress(string(b))
			say("specs: %d of %d finished, %d failed, %s", finished, willRun, failed, time.Since(start).Round(time.Second))
		}
	}
}

// progress counts finished and failed specs in ginkgo's output so far: it
// prints a • for each finished spec, followed by [FAILED] (or [PANICKED],
// [TIMEDOUT], ...) for one that did not pass.
func progress(out string) (finished, failed int) {
	for _, l := range strings.Split(out, "\n") {
		for rest := l; ; {
			i := strings.Index(rest, "•")
			if i < 0 {
				break
			}
			finished++
			rest = rest[i+len("•"):]
			for _, s := range []string{"[FAILED]", "[PANICKED]", "[TIMEDOUT]", "[INTERRUPTED]", "[ABORTED]"} {
				if strings.HasPrefix(strings.TrimSpace(rest), s) {
					failed++
				}
			}
		}
	}
	return finished, failed
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
